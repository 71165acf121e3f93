//! The store commands on a real directory: open (natively or in the wasm guest), the
//! writes, the reads, and their JSON.

use super::*;

/// Opens the store in `dir`. `create`: make the directory (or an empty one) a store; a
/// non-empty directory that is not a store is refused either way.
/// The store behind a command: native, or in the wasm guest (`--guest`). One per process, so
/// the size difference of the variants does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum AnyStore {
    Native(Store<store_core::CryptFs<HostFs>>),
    Guest(wasm_host::GuestStore),
}

/// A duration on the command line: a number and a unit (ns, us, ms, s, m, h), e.g. `10s`,
/// `500ms`. Refuses zero, a missing unit and overflow.
pub(crate) fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit, e.g. 10s or 500ms"))?;
    let per: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(format!("{s:?}: unit must be ns, us, ms, s, m or h")),
    };
    let ns = n
        .checked_mul(per)
        .ok_or_else(|| format!("{s:?}: too long"))?;
    if ns == 0 {
        return Err(format!("{s:?}: a ttl must be positive"));
    }
    Ok(Duration::from_nanos(ns))
}

/// Calls the same method on either store, errors as anyhow.
macro_rules! on {
    ($s:expr, $x:ident => $e:expr) => {
        match $s {
            AnyStore::Native($x) => $e.map_err(anyhow::Error::from),
            AnyStore::Guest($x) => $e.map_err(anyhow::Error::from),
        }
    };
}

impl AnyStore {
    fn state(&mut self) -> Result<store_core::StreamState> {
        match self {
            AnyStore::Native(s) => Ok(s.state()),
            AnyStore::Guest(g) => Ok(g.state()?),
        }
    }
    fn close(self) -> Result<()> {
        on!(self, s => s.close())
    }

    /// The first message at or after `from` matching any of `filters`.
    fn next_multi(&mut self, filters: &[&str], from: u64) -> Result<Option<StoredMsg>> {
        on!(self, s => s.next_matching_multi(filters, from))
    }

    /// The last message at or before `from` matching any of `filters`.
    fn prev_multi(&mut self, filters: &[&str], from: u64) -> Result<Option<StoredMsg>> {
        on!(self, s => s.prev_matching_multi(filters, from))
    }
}

/// Reads the key file of `--key-file`: 32 raw bytes, or 64 hex digits (whitespace around
/// them ignored).
pub(crate) fn read_key(path: &Path) -> Result<[u8; 32]> {
    let raw =
        std::fs::read(path).with_context(|| format!("reading key file {}", path.display()))?;
    if let Ok(k) = <[u8; 32]>::try_from(raw.as_slice()) {
        return Ok(k);
    }
    let text = std::str::from_utf8(&raw).unwrap_or("").trim();
    let mut key = [0u8; 32];
    if text.len() != 64 || !text.is_ascii() {
        bail!(
            "key file {}: expected 32 bytes or 64 hex digits",
            path.display()
        );
    }
    for (i, b) in key.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .with_context(|| format!("key file {}: not hex", path.display()))?;
    }
    Ok(key)
}

/// The encryption and compression `--key-file` and `--compress` ask for.
pub(crate) fn layer_config(dir: &DirArg) -> Result<store_core::crypt::LayerConfig> {
    layer_from(dir.key_file.as_deref(), dir.compress)
}

/// The layer of a key file (if any) and the compression flag.
pub(crate) fn layer_from(
    key_file: Option<&Path>,
    compress: bool,
) -> Result<store_core::crypt::LayerConfig> {
    let encryption = match key_file {
        Some(p) => Some(store_core::Encryption::new(
            store_core::Cipher::XChaCha20Poly1305,
            read_key(p)?,
        )),
        None => None,
    };
    let compression = if compress {
        store_core::Compression::Lz4
    } else {
        store_core::Compression::None
    };
    Ok(store_core::crypt::LayerConfig {
        encryption,
        compression,
    })
}

/// [`open_store_at`] with the directory, the sandbox and the key of `dir`.
pub(crate) fn open_store(dir: &DirArg, cfg: Config, create: bool) -> Result<AnyStore> {
    let layer = layer_config(dir)?;
    let cfg = Config {
        encryption: layer.encryption,
        compression: layer.compression,
        ..cfg
    };
    open_store_at(&dir.dir, cfg, create, dir.guest)
}

pub(crate) fn open_store_at(
    dir: &Path,
    cfg: Config,
    create: bool,
    guest: bool,
) -> Result<AnyStore> {
    // a crash during a purge can leave purge.new/purge.old and no msgs/ (recovery finishes it)
    let looks_like_store = ["msgs", "purge.new", "purge.old"]
        .iter()
        .any(|d| dir.join(d).is_dir());
    if !looks_like_store {
        match std::fs::read_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    bail!(
                        "no store at {}: the directory does not exist",
                        dir.display()
                    );
                }
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
            Ok(mut it) => {
                if it.next().is_some() {
                    bail!(
                        "{} is not a seqstore directory (no msgs/) and is not empty: refusing to use it",
                        dir.display()
                    );
                }
                if !create {
                    bail!("no store at {}: the directory is empty", dir.display());
                }
            }
        }
    }
    if create {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let store = if guest {
        let g = wasm_host::GuestStore::open_dir(dir, cfg, Box::new(SystemClock))
            .with_context(|| format!("recovering the store in {} (guest)", dir.display()))?;
        AnyStore::Guest(g)
    } else {
        // host-fs names the root in its error (`open root "DIR": …`); no context repeats it.
        let fs = HostFs::open(dir)?;
        let s = Store::open_layered_with_clock(fs, cfg, Box::new(SystemClock))
            .with_context(|| format!("recovering the store in {}", dir.display()))?;
        AnyStore::Native(s)
    };
    let rep = match &store {
        AnyStore::Native(s) => s.recovery_report(),
        AnyStore::Guest(g) => g.recovery_report(),
    };
    if rep.lost_data() {
        eprintln!("seqstore: recovery repaired damage: {rep:?}");
    }
    Ok(store)
}

pub(crate) fn msg_json(m: &StoredMsg) -> Value {
    let text = |b: &[u8]| match std::str::from_utf8(b) {
        Ok(s) => json!(s),
        Err(_) => json!({ "hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>() }),
    };
    json!({"seq": m.seq, "ts": m.ts, "subject": m.subject, "headers": text(&m.headers), "payload": text(&m.payload)})
}

pub(crate) fn print_msg(m: &StoredMsg, as_json: bool) {
    if as_json {
        println!("{}", msg_json(m));
    } else {
        println!(
            "{}\t{}\t{}\t{}",
            m.seq,
            m.ts,
            m.subject,
            String::from_utf8_lossy(&m.payload)
        );
    }
}

pub(crate) fn store_op(cmd: Cmd) -> Result<ExitCode> {
    // `--ablation` exists only in the crash lab's build.
    #[cfg(feature = "ablation")]
    let cfg = lab::store_config(&cmd)?;
    #[cfg(not(feature = "ablation"))]
    let cfg = Config::default();
    match cmd {
        Cmd::Append {
            dir,
            subject,
            data,
            headers,
            sync,
            ttl,
        } => {
            let payload = match data {
                Some(d) => d.into_bytes(),
                None => {
                    let mut v = Vec::new();
                    std::io::stdin().read_to_end(&mut v)?;
                    v
                }
            };
            let cfg = Config {
                sync: match sync {
                    SyncArg::Always => SyncPolicy::Always,
                    SyncArg::Interval => SyncPolicy::Interval(Duration::from_secs(1)),
                    SyncArg::Never => SyncPolicy::Never,
                },
                ..cfg
            };
            let mut s = open_store(&dir, cfg, true)?;
            let seq = match ttl {
                None => on!(&mut s, x => x.append(&subject, headers.as_bytes(), &payload))?,
                Some(t) => {
                    on!(&mut s, x => x.append_with_ttl(&subject, headers.as_bytes(), &payload, t))?
                }
            };
            s.close()?;
            println!("{seq}");
        }
        Cmd::Skip { dir, seq, count } => {
            let mut s = open_store(&dir, cfg, false)?;
            let last = on!(&mut s, x => x.skip_many(seq, count))?;
            s.close()?;
            println!("{last}");
        }
        Cmd::Get { dir, seq, json } => {
            let mut s = open_store(&dir, cfg, false)?;
            print_msg(&on!(&mut s, x => x.get(seq))?, json);
            s.close()?;
        }
        Cmd::Last { dir, subject, json } => {
            let mut s = open_store(&dir, cfg, false)?;
            match on!(&mut s, x => x.last_for_subject(&subject))? {
                Some(m) => print_msg(&m, json),
                None => bail!("no message with subject {subject:?}"),
            }
            s.close()?;
        }
        cmd @ (Cmd::Next { .. } | Cmd::Prev { .. } | Cmd::Pending { .. } | Cmd::TimeSeq { .. }) => {
            read_op(cmd, cfg)?
        }
        Cmd::Delete { dir, seq, erase } => {
            let mut s = open_store(&dir, cfg, false)?;
            if erase {
                on!(&mut s, x => x.erase(seq))?;
            } else {
                on!(&mut s, x => x.delete(seq))?;
            }
            s.close()?;
        }
        Cmd::Purge {
            dir,
            filter,
            keep,
            up_to,
        } => {
            let mut s = open_store(&dir, cfg, false)?;
            let n = match filter {
                None if keep == 0 && up_to == 0 => on!(&mut s, x => x.purge())?,
                f => on!(&mut s, x => x.purge_ex(f.as_deref().unwrap_or(">"), up_to, keep))?,
            };
            let st = s.state()?;
            s.close()?;
            println!(
                "purged {n} messages; first {} last {}",
                st.first_seq, st.last_seq
            );
        }
        Cmd::Compact { dir, seq } => {
            let mut s = open_store(&dir, cfg, false)?;
            let n = on!(&mut s, x => x.compact(seq))?;
            s.close()?;
            println!("removed {n} messages");
        }
        Cmd::Truncate { dir, seq } => {
            let mut s = open_store(&dir, cfg, false)?;
            let n = on!(&mut s, x => x.truncate(seq))?;
            s.close()?;
            println!("removed {n} messages");
        }
        Cmd::State { dir, json } => {
            let mut s = open_store(&dir, cfg, false)?;
            let st = s.state()?;
            if json {
                println!(
                    "{}",
                    json!({"msgs": st.msgs, "bytes": st.bytes, "first_seq": st.first_seq,
                           "first_ts": st.first_ts, "last_seq": st.last_seq, "last_ts": st.last_ts,
                           "num_deleted": st.num_deleted, "num_subjects": st.num_subjects})
                );
            } else {
                println!("messages   {}\nbytes      {}\nfirst seq  {}\nlast seq   {}\ndeleted    {}\nsubjects   {}",
                    st.msgs, st.bytes, st.first_seq, st.last_seq, st.num_deleted, st.num_subjects);
            }
            s.close()?;
        }
        Cmd::Dump { dir, json } => {
            let mut s = open_store(&dir, cfg, false)?;
            let mut from = 0;
            while let Some(m) = on!(&mut s, x => x.next_matching(">", from))? {
                print_msg(&m, json);
                from = m.seq + 1;
            }
            s.close()?;
        }
        #[cfg(feature = "ablation")]
        Cmd::Demo(_) | Cmd::Crashcheck(_) => unreachable!("handled by run"),
        #[cfg(not(feature = "ablation"))]
        Cmd::LabOnly { .. } => unreachable!("handled by run"),
        Cmd::Verify { .. }
        | Cmd::Bench { .. }
        | Cmd::Snapshot { .. }
        | Cmd::Restore { .. }
        | Cmd::Consumer { .. }
        | Cmd::Trace(_) => {
            unreachable!("handled by run")
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The reads that take filters or a time (`next`, `prev`, `pending`, `time-seq`).
pub(crate) fn read_op(cmd: Cmd, cfg: Config) -> Result<()> {
    match cmd {
        Cmd::Next {
            dir,
            filter,
            from,
            json,
        } => {
            let mut s = open_store(&dir, cfg, false)?;
            let filters: Vec<&str> = filter.iter().map(String::as_str).collect();
            match s.next_multi(&filters, from)? {
                Some(m) => print_msg(&m, json),
                None => bail!("no message matching {filter:?} at or after {from}"),
            }
            s.close()?;
        }
        Cmd::Prev {
            dir,
            filter,
            from,
            json,
        } => {
            let mut s = open_store(&dir, cfg, false)?;
            let filters: Vec<&str> = filter.iter().map(String::as_str).collect();
            let from = from.unwrap_or(u64::MAX);
            match s.prev_multi(&filters, from)? {
                Some(m) => print_msg(&m, json),
                None if from == u64::MAX => bail!("no message matching {filter:?}"),
                None => bail!("no message matching {filter:?} at or before {from}"),
            }
            s.close()?;
        }
        Cmd::Pending {
            dir,
            filter,
            from,
            last_per_subject,
            json,
        } => {
            let mut s = open_store(&dir, cfg, false)?;
            let filters: Vec<&str> = filter.iter().map(String::as_str).collect();
            let (n, through) =
                on!(&mut s, x => x.num_pending_multi(from, &filters, last_per_subject))?;
            if json {
                println!("{}", json!({"pending": n, "valid_through": through}));
            } else {
                println!("pending        {n}\nvalid through  {through}");
            }
            s.close()?;
        }
        Cmd::TimeSeq { dir, ts, json } => {
            let mut s = open_store(&dir, cfg, false)?;
            let seq = on!(&mut s, x => x.seq_from_time(ts))?;
            if json {
                println!("{}", json!({"seq": seq}));
            } else {
                println!("{seq}");
            }
            s.close()?;
        }
        _ => unreachable!("store_op sends only reads here"),
    }
    Ok(())
}
