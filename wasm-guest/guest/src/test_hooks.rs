//! **Test only** (the `test-hooks` feature): ways for wasm-host's sandbox tests to make the
//! guest misbehave on purpose.

use std::cell::Cell;

use crate::bindings::exports::seqstore::store::test_hooks::Guest;
use crate::Component;
use seqstore_core::Ablation;

thread_local! {
    /// The switch `set-ablation` chose, applied by every later `store.open` of this instance.
    static ABLATION: Cell<Ablation> = const { Cell::new(Ablation::Full) };
}

/// The ablation switch for a store opened now.
pub(crate) fn ablation() -> Ablation {
    ABLATION.with(Cell::get)
}

impl Guest for Component {
    fn spin() {
        // A loop the optimizer cannot remove; only the host's epoch deadline ends it.
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }

    fn allocate(bytes: u64) -> u64 {
        // 1 MiB chunks, each touched, kept until the call returns: the allocation is real.
        const CHUNK: usize = 1 << 20;
        let mut kept: Vec<Vec<u8>> = Vec::new();
        let mut got: u64 = 0;
        while got < bytes {
            let mut c = vec![0u8; CHUNK];
            for i in (0..CHUNK).step_by(4096) {
                c[i] = 1;
            }
            kept.push(std::hint::black_box(c));
            got += CHUNK as u64;
        }
        got
    }

    fn read_file(path: String) -> Result<u64, String> {
        std::fs::read(&path)
            .map(|d| d.len() as u64)
            .map_err(|e| format!("{path}: {e}"))
    }

    fn set_ablation(name: String) -> Result<(), String> {
        let a: Ablation = name.parse()?;
        ABLATION.with(|c| c.set(a));
        Ok(())
    }
}
