//! The cells: one measured engine or configuration each (fsync probe, appends under each
//! sync policy, the streams the recovery, get and purge tables share).

use super::*;
use seqstore_core::surface::StreamStore;

/// Median µs of write 128 B + fdatasync on a fresh file (one untimed round first).
pub(crate) fn fsync_probe(ctx: &mut Ctx<'_>, opts: &BenchOpts) -> Result<Option<f64>> {
    let dir = ctx.tempdir("probe")?;
    let mut f = File::create(dir.path().join("probe")).context("create probe file")?;
    f.write_all(&ctx.payload)?;
    f.sync_data()?;
    let mut lat = Vec::with_capacity(opts.probe_iters as usize);
    let t0 = Instant::now();
    for _ in 0..opts.probe_iters {
        let t = Instant::now();
        f.write_all(&ctx.payload)?;
        f.sync_data()?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if t0.elapsed().as_secs_f64() > opts.probe_max_secs {
            break;
        }
    }
    drop(f);
    ctx.finish_dir(dir)?;
    Ok(crate::util::median(&lat))
}

/// N appends, no fsync; msgs/s up to the last append.
pub(super) fn nosync_cell(ctx: &mut Ctx<'_>, engine: &str, n: u64) -> Result<f64> {
    let dir = ctx.tempdir(engine)?;
    let p = dir.path();
    let payload = &ctx.payload;
    let v = match engine {
        "seqstore" => {
            let mut s = open_store(p, SyncPolicy::Never)?;
            let t = Instant::now();
            for i in 0..n {
                s.append(ctx.subject(i), b"", payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(s);
            v
        }
        "seqstore_encrypted" | "seqstore_xchacha" => {
            let cipher = if engine == "seqstore_xchacha" {
                seqstore_core::Cipher::XChaCha20Poly1305
            } else {
                seqstore_core::Cipher::Aes256Gcm
            };
            let mut s = open_encrypted_store(p, SyncPolicy::Never, cipher)?;
            let t = Instant::now();
            for i in 0..n {
                s.append(ctx.subject(i), b"", payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(s);
            v
        }
        "baseline" => {
            let mut b = Baseline::create(p)?;
            let t = Instant::now();
            for _ in 0..n {
                b.append(payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(b);
            v
        }
        "okaywal" => {
            let w = OkayWal::create(p)?;
            let mut e = w.entry()?;
            let t = Instant::now();
            for _ in 0..n {
                e.write_chunk(payload)?;
            }
            let v = rate(n, t.elapsed());
            // abandoned, not committed: nothing of it needs to reach the disk
            e.rollback()?;
            w.shutdown()?;
            v
        }
        #[cfg(feature = "guest")]
        "guest" | "guest_wasi" => {
            let mut g = open_guest(p, SyncPolicy::Never, engine == "guest_wasi")?;
            let t = Instant::now();
            for i in 0..n {
                g.append(ctx.subject(i), b"", payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(g);
            v
        }
        "fjall" | "fjall_manual" => {
            let mut f = Fjall::create(p, engine == "fjall_manual")?;
            let t = Instant::now();
            for _ in 0..n {
                f.append(payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(f);
            v
        }
        _ => bail!("unknown engine {engine}"),
    };
    ctx.finish_dir(dir)?;
    Ok(v)
}

/// N appends with a durable sync after every `batch` (the clock includes the last sync).
pub(super) fn every_cell(ctx: &mut Ctx<'_>, engine: &str, n: u64, batch: u64) -> Result<f64> {
    let dir = ctx.tempdir(engine)?;
    let p = dir.path();
    let payload = &ctx.payload;
    let v = match engine {
        "seqstore" => {
            let mut s = open_store(p, SyncPolicy::Never)?;
            let t = Instant::now();
            for i in 0..n {
                s.append(ctx.subject(i), b"", payload)?;
                if (i + 1) % batch == 0 || i + 1 == n {
                    s.sync()?;
                }
            }
            let v = rate(n, t.elapsed());
            drop(s);
            v
        }
        "baseline" => {
            let mut b = Baseline::create(p)?;
            let t = Instant::now();
            for i in 0..n {
                b.append(payload)?;
                if (i + 1) % batch == 0 || i + 1 == n {
                    b.sync()?;
                }
            }
            rate(n, t.elapsed())
        }
        "okaywal" => {
            let w = OkayWal::create(p)?;
            let t = Instant::now();
            w.append_committed(payload, n, batch)?;
            let v = rate(n, t.elapsed());
            w.shutdown()?;
            v
        }
        "fjall" => {
            let mut f = Fjall::create(p, false)?;
            let t = Instant::now();
            for i in 0..n {
                f.append(payload)?;
                if (i + 1) % batch == 0 || i + 1 == n {
                    f.sync()?;
                }
            }
            let v = rate(n, t.elapsed());
            drop(f);
            v
        }
        _ => bail!("unknown engine {engine}"),
    };
    ctx.finish_dir(dir)?;
    Ok(v)
}

/// Durable appends for `secs` seconds or `max` fsyncs, whichever comes first (one untimed
/// append first: it creates the block file and its directory entry).
pub(crate) fn always_cell(ctx: &mut Ctx<'_>, cell: &str, secs: f64, max: u64) -> Result<f64> {
    let dir = ctx.tempdir(cell)?;
    let p = dir.path();
    let payload = &ctx.payload;
    let dur = Duration::from_secs_f64(secs);
    let v = match cell {
        "fdatasync_probe_per_s" => {
            let mut f = File::create(p.join("probe"))?;
            f.write_all(payload)?;
            f.sync_data()?;
            let (t, mut n) = (Instant::now(), 0u64);
            while n < max && t.elapsed() < dur {
                f.write_all(payload)?;
                f.sync_data()?;
                n += 1;
            }
            rate(n, t.elapsed())
        }
        "seqstore_1" => {
            let mut s = open_store(p, SyncPolicy::Always)?;
            s.append(ctx.subject(0), b"", payload)?;
            let (t, mut n) = (Instant::now(), 0u64);
            while n < max && t.elapsed() < dur {
                s.append(ctx.subject(n), b"", payload)?;
                n += 1;
            }
            rate(n, t.elapsed())
        }
        "baseline_1" => {
            let mut b = Baseline::create(p)?;
            b.append(payload)?;
            b.sync()?;
            let (t, mut n) = (Instant::now(), 0u64);
            while n < max && t.elapsed() < dur {
                b.append(payload)?;
                b.sync()?;
                n += 1;
            }
            rate(n, t.elapsed())
        }
        "seqstore_16" | "seqstore_64" => {
            let threads: u64 = if cell == "seqstore_16" { 16 } else { 64 };
            let store = SharedStore::new(open_store(p, SyncPolicy::Always)?);
            store.append(ctx.subject(0), b"", payload)?;
            let subjects = &ctx.subjects;
            // each writer stops after `max` appends: about `max` group fsyncs in all
            let t = Instant::now();
            let n = std::thread::scope(|sc| -> Result<u64> {
                let hs: Vec<_> = (0..threads)
                    .map(|k| {
                        let st = store.clone();
                        sc.spawn(move || -> Result<u64> {
                            let mut n = 0u64;
                            while n < max && t.elapsed() < dur {
                                let subj = &subjects[((k + n * threads) % 64) as usize];
                                st.append(subj, b"", payload)?;
                                n += 1;
                            }
                            Ok(n)
                        })
                    })
                    .collect();
                let mut total = 0;
                for h in hs {
                    total += h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
                }
                Ok(total)
            })?;
            rate(n, t.elapsed())
        }
        _ => bail!("unknown cell {cell}"),
    };
    ctx.finish_dir(dir)?;
    Ok(v)
}

/// Appends `n` messages with `SyncPolicy::Never` and returns the open store.
pub(super) fn write_stream(ctx: &Ctx<'_>, path: &Path, n: u64) -> Result<Store<HostFs>> {
    let mut s = open_store(path, SyncPolicy::Never)?;
    for i in 0..n {
        s.append(ctx.subject(i), b"", &ctx.payload)?;
    }
    Ok(s)
}

/// A stream written, closed (index.db) and reopened from its index; every block read.
pub(super) fn closed_stream(ctx: &mut Ctx<'_>, path: &Path, n: u64) -> Result<Store<HostFs>> {
    write_stream(ctx, path, n)?.close()?;
    ctx.bytes_written += dir_size(path);
    let mut s = open_store(path, SyncPolicy::Never)?;
    ensure!(
        s.recovery_report().used_index,
        "reopen after close did not use index.db: {:?}",
        s.recovery_report().index_rejected
    );
    warm(&mut s, n)?;
    Ok(s)
}

/// Reads every block (a get every few hundred sequences): entries loaded, pages cached.
pub(super) fn warm(s: &mut Store<HostFs>, n: u64) -> Result<()> {
    let step = (n / 4096).max(1) as usize;
    for seq in (1..=n).step_by(step) {
        black_box(s.get(seq)?);
    }
    black_box(s.get(n)?);
    Ok(())
}

pub(super) fn seconds_per_gib(d: Duration, bytes: u64) -> f64 {
    d.as_secs_f64() / (bytes as f64 / (1u64 << 30) as f64)
}

/// The rebuild and the read limit from a cold page cache, where the run may empty it.
fn rebuild_cold(
    bp: &Path,
    opts: &BenchOpts,
    big_bytes: u64,
    rebuild: &mut Table,
    notes: &mut Vec<String>,
) -> Result<()> {
    for _ in 0..opts.open_reps {
        if !crate::util::drop_page_cache() {
            notes
                .push("cold rebuild not measured: this process cannot empty the page cache".into());
            return Ok(());
        }
        let t = Instant::now();
        let s = open_store(bp, SyncPolicy::Never)?;
        let d = t.elapsed();
        ensure!(
            !s.recovery_report().used_index,
            "cold rebuild open used index.db"
        );
        drop(s);
        crate::util::drop_page_cache();
        let t = Instant::now();
        let (read, _) = crate::util::read_and_crc_all(bp)?;
        let limit = t.elapsed();
        rebuild.push("seqstore_cold", seconds_per_gib(d, big_bytes));
        rebuild.push("read_crc32_cold", seconds_per_gib(limit, read));
    }
    Ok(())
}

/// The tables that share the big stream: rebuild, index, gets, purge.
#[allow(clippy::too_many_arguments)]
pub(super) fn streams(
    ctx: &mut Ctx<'_>,
    opts: &BenchOpts,
    rebuild: &mut Table,
    [index, index_cpu]: [&mut Table; 2],
    get: &mut Table,
    [purge, purge_cpu]: [&mut Table; 2],
    [reads, batch]: [&mut Table; 2],
    notes: &mut Vec<String>,
) -> Result<()> {
    let big = ctx.tempdir("big")?;
    let bp = big.path().to_path_buf();
    ctx.tick(&format!(
        "write a {} message stream (dropped without close)",
        opts.big_msgs
    ));
    drop(write_stream(ctx, &bp, opts.big_msgs)?);
    let big_bytes = dir_size(&bp);
    ctx.bytes_written += big_bytes;

    if opts.runs(REBUILD) {
        ctx.tick(&format!(
            "{REBUILD}: {} timed opens of {} MiB without index.db",
            opts.open_reps,
            big_bytes >> 20
        ));
        for r in 0..=opts.open_reps {
            let t = Instant::now();
            let s = open_store(&bp, SyncPolicy::Never)?;
            let d = t.elapsed();
            ensure!(
                !s.recovery_report().used_index && s.state().msgs == opts.big_msgs,
                "rebuild open: unexpected state {:?}",
                s.state()
            );
            drop(s);
            let t = Instant::now();
            let (read, _) = crate::util::read_and_crc_all(&bp)?;
            let limit = t.elapsed();
            // the same rebuild on the opening thread alone (`rebuild_threads` 1), as the
            // wasm guest rebuilds
            let cfg = Config::default()
                .with_sync(SyncPolicy::Never)
                .with_rebuild_threads(1);
            let t = Instant::now();
            drop(open_store_with(&bp, cfg)?);
            let one = t.elapsed();
            if r > 0 {
                // the first open warms the page cache
                rebuild.push("seqstore", seconds_per_gib(d, big_bytes));
                rebuild.push("read_crc32", seconds_per_gib(limit, read));
                rebuild.push("seqstore_1_thread", seconds_per_gib(one, big_bytes));
            }
            #[cfg(feature = "guest")]
            for (cell, wasi) in [("guest", false), ("guest_wasi", true)] {
                let t = Instant::now();
                let mut g = open_guest(&bp, SyncPolicy::Never, wasi)?;
                let d = t.elapsed();
                let st = g.state()?;
                ensure!(
                    !g.recovery_report().used_index && st.msgs == opts.big_msgs,
                    "{cell} rebuild open: unexpected state {st:?}"
                );
                drop(g);
                if r > 0 {
                    rebuild.push(cell, seconds_per_gib(d, big_bytes));
                }
            }
        }
        rebuild_cold(&bp, opts, big_bytes, rebuild, notes)?;
        notes.push(format!(
            "the rebuild stream is the big stream: {} messages, {} MiB of blocks",
            opts.big_msgs,
            big_bytes >> 20
        ));
    }

    ctx.tick(&format!(
        "close the big stream (index.db), write a {} message stream",
        opts.small_msgs
    ));
    open_store(&bp, SyncPolicy::Never)?.close()?;
    let small = ctx.tempdir("small")?;
    let sp = small.path().to_path_buf();
    write_stream(ctx, &sp, opts.small_msgs)?.close()?;
    ctx.bytes_written += dir_size(&sp);

    if opts.runs(INDEX) {
        ctx.tick(&format!(
            "{INDEX}: {} timed opens each, alternating",
            opts.open_reps
        ));
        for _ in 0..opts.open_reps {
            for (cell, p, n) in [(SMALL, &sp, opts.small_msgs), (BIG, &bp, opts.big_msgs)] {
                let c = thread_cpu_ns();
                let t = Instant::now();
                let s = open_store(p, SyncPolicy::Never)?;
                let d = t.elapsed();
                index_cpu.push(cell, (thread_cpu_ns() - c) as f64 / 1e6);
                ensure!(
                    s.recovery_report().used_index && s.state().msgs == n,
                    "index open: index.db not used ({:?})",
                    s.recovery_report().index_rejected
                );
                drop(s);
                index.push(cell, d.as_secs_f64() * 1e3);
            }
        }
    }
    if opts.runs(READS) {
        let (small, big) = (
            (sp.as_path(), opts.small_msgs),
            (bp.as_path(), opts.big_msgs),
        );
        crate::reads::run_reads(ctx, opts, reads, small, big)?;
    }
    if opts.runs(BATCH) {
        crate::reads::run_batch(ctx, opts, batch, (bp.as_path(), opts.big_msgs))?;
    }
    small.close()?;

    // the big stream, opened from index.db and warmed: the get table, then the first purge
    let mut s = open_store(&bp, SyncPolicy::Never)?;
    warm(&mut s, opts.big_msgs)?;
    if opts.runs(GET) {
        ctx.tick(&format!(
            "{GET}: {} rounds of {} random gets",
            opts.reps, opts.gets
        ));
        let mut rng = Rng::new(0x6e75_6d62_6572);
        let seqs: Vec<u64> = (0..opts.gets)
            .map(|_| rng.below(opts.big_msgs) + 1)
            .collect();
        let mut sum = 0u64;
        // "seqstore": a block cache that holds the whole stream (what a user who wants fast
        // random reads configures); the default 64 MiB cache and no cache, for comparison.
        // Alternating; each cell first runs an untimed round so its cache settles.
        let whole = (big_bytes + (64 << 20)).next_multiple_of(64 << 20);
        let cells = [
            ("seqstore", whole),
            ("seqstore_cache_64mib", 64 << 20),
            ("seqstore_no_cache", 0),
        ];
        for _ in 0..opts.reps {
            for (cell, cache) in cells {
                s.set_block_cache(cache);
                for &q in seqs.iter().take(200_000) {
                    sum += s.get(q)?.payload.len() as u64;
                }
                let t = Instant::now();
                for &q in &seqs {
                    sum += s.get(q)?.payload.len() as u64;
                }
                get.push(cell, rate(opts.gets, t.elapsed()));
            }
        }
        black_box(sum);
        notes.push(format!(
            "gets: `seqstore` runs with Config::block_cache = {} MiB (the stream is {} MiB); \
             seqstore_cache_64mib is the default cache, seqstore_no_cache reads every record \
             with pread",
            whole >> 20,
            big_bytes >> 20
        ));
    }

    if opts.runs(PURGE) {
        let mut first_big = Some(s);
        let rounds = opts.purge_small_reps.max(opts.purge_big_reps);
        for r in 0..rounds {
            if r < opts.purge_small_reps {
                ctx.tick(&format!(
                    "{PURGE} round {}/{}: {} messages",
                    r + 1,
                    rounds,
                    opts.small_msgs
                ));
                let d = ctx.tempdir("purge-small")?;
                let mut st = closed_stream(ctx, d.path(), opts.small_msgs)?;
                let c = thread_cpu_ns();
                let t = Instant::now();
                let n = st.purge()?;
                purge.push(SMALL, t.elapsed().as_secs_f64() * 1e3);
                purge_cpu.push(SMALL, (thread_cpu_ns() - c) as f64 / 1e6);
                ensure!(n == opts.small_msgs, "purge removed {n}");
                drop(st);
                d.close()?;
            }
            if r < opts.purge_big_reps {
                ctx.tick(&format!(
                    "{PURGE} round {}/{}: {} messages",
                    r + 1,
                    rounds,
                    opts.big_msgs
                ));
                let (mut st, d) = match first_big.take() {
                    Some(st) => (st, None),
                    None => {
                        let d = ctx.tempdir("purge-big")?;
                        let st = closed_stream(ctx, d.path(), opts.big_msgs)?;
                        (st, Some(d))
                    }
                };
                let c = thread_cpu_ns();
                let t = Instant::now();
                let n = st.purge()?;
                purge.push(BIG, t.elapsed().as_secs_f64() * 1e3);
                purge_cpu.push(BIG, (thread_cpu_ns() - c) as f64 / 1e6);
                ensure!(n == opts.big_msgs, "purge removed {n}");
                drop(st);
                if let Some(d) = d {
                    d.close()?;
                }
            }
        }
    } else {
        drop(s);
    }
    big.close()?;
    Ok(())
}
