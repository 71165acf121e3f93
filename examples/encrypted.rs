//! An encrypted (and compressed) store: every file it writes is sealed with an AEAD under
//! your key. The key comes from you (a KMS, a key file); opening with another key, or with
//! none, is a typed error and decrypts nothing.

use seqstore_core::{Cipher, Compression, Config, Encryption, Error, Store};
use seqstore_fs::HostFs;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let key = [7u8; 32]; // stands in for a real key: 32 random bytes kept outside the store
    let cfg = |key: Option<[u8; 32]>| {
        Config::default()
            .with_encryption(key.map(|k| Encryption::new(Cipher::XChaCha20Poly1305, k)))
            .with_compression(Compression::Lz4)
    };
    let mut store = Store::builder(HostFs::create(dir.path())?)
        .config(cfg(Some(key)))
        .open_layered()?;
    let seq = store.append("secrets.db", b"", b"the password is swordfish")?;
    store.close()?;

    // the bytes on disk do not contain the payload
    for e in walk(dir.path())? {
        assert!(
            !contains(&std::fs::read(&e)?, b"swordfish"),
            "{}",
            e.display()
        );
    }

    // the wrong key and no key are refused, naming the file
    for (what, cfg) in [
        ("the wrong key", cfg(Some([8; 32]))),
        ("no key", Config::default()),
    ] {
        let fs = HostFs::open(dir.path())?;
        match Store::builder(fs).config(cfg).open_layered() {
            Err(e @ Error::WrongKey { .. }) => println!("opened with {what}: {e}"),
            Err(e) => return Err(format!("opened with {what}: unexpected {e}").into()),
            Ok(_) => return Err(format!("opened with {what}").into()),
        }
    }

    // so is a plain open, which does not look for the layer
    match Store::builder(HostFs::open(dir.path())?).open() {
        Err(e @ Error::WrongKey { .. }) => println!("opened as a plain store: {e}"),
        Err(e) => return Err(format!("opened as a plain store: unexpected {e}").into()),
        Ok(_) => return Err("opened as a plain store".into()),
    }

    // the right key reads it back
    let mut store = Store::builder(HostFs::open(dir.path())?)
        .config(cfg(Some(key)))
        .open_layered()?;
    assert_eq!(store.get(seq)?.payload, b"the password is swordfish");
    store.close()?;
    Ok(())
}

fn walk(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn runs() {
    main().unwrap();
}
