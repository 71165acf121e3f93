//! The same store, run inside the wasm sandbox: `GuestStore` has the `Store` API, but the
//! store's code runs as a WASI component under wasmtime, with memory and time limits, and sees
//! the filesystem you hand it and nothing else. A bug in it (or a hostile input) traps the
//! guest, not your process.

use seqstore_core::surface::StreamStore;
use seqstore_core::Config;
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_fs::{HostFs, SystemClock};
use seqstore_wasm::GuestStore;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // on a real directory
    let dir = tempfile::tempdir()?;
    let fs = HostFs::create(dir.path())?;
    let mut store = GuestStore::from_fs(fs, Config::default(), Box::new(SystemClock))?;
    let seq = store.append("orders.eu", b"", b"hello from the sandbox")?;
    assert_eq!(store.get(seq)?.payload, b"hello from the sandbox");
    store.close()?;

    // the native store opens what the guest wrote: one format, one store
    let native = seqstore_core::Store::builder(HostFs::open(dir.path())?)
        .config(Config::default())
        .clock(SystemClock)
        .open()?;
    assert_eq!(native.state().last_seq, seq);
    native.close()?;

    // on any other Fs: here fault-fs, whose crash image shows what a power cut keeps
    let fs = FaultFs::new(Model::Posix);
    let mut store = GuestStore::from_fs(fs.clone(), Config::default(), Box::new(SystemClock))?;
    store.append("orders.us", b"", b"durable when append returns")?;
    let image = fs.crash();
    store.close()?;
    let mut recovered = GuestStore::from_fs(image, Config::default(), Box::new(SystemClock))?;
    println!("after a power cut: {:?}", recovered.state()?);
    assert_eq!(recovered.get(1)?.payload, b"durable when append returns");
    recovered.close()?;
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}
