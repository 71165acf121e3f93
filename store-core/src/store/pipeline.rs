//! The rebuild on several threads ([`Config::rebuild_threads`]), where the `Fs` allows it
//! ([`Fs::parallel_reads`]): worker threads each scan a block (`prescan.rs`) while the
//! opening thread applies, in order, the blocks they have finished.
//!
//! The opening thread opens each block (open, length, header), hands the file to a worker,
//! and takes it back with what the worker found. It applies that through the replay the
//! single-threaded rebuild uses ([`Store::accept_message`], [`Store::visit_other`]), so the
//! state, the report and every write the rebuild makes (cuts, removals) are the same. What
//! differs: blocks are opened and read ahead of their turn, up to one per worker, and read
//! by the workers. A failure opening or reading a block is returned in that block's turn,
//! after the blocks before it were applied, as the single-threaded rebuild returns it.
//!
//! [`Config::rebuild_threads`]: crate::Config::rebuild_threads

use super::entries::Entry;
use super::prescan::{prescan, Job, Prescanned};
use super::recover::{OpenedBlock, Rebuild, RecordAt, ScannedBlock};
use super::scan::ScanEnd;
use super::Store;
use crate::error::{Error, Result};
use crate::fs::Fs;
use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

/// Below about this many bytes of blocks (estimated from their count and `block_size`) a
/// rebuild stays on the opening thread: starting threads costs more than they save.
const PIPELINE_MIN: u64 = 4 << 20;

/// The most workers a rebuild starts, whatever `Config::rebuild_threads` asks.
const MAX_WORKERS: usize = 64;

/// One worker: the blocks sent to it, and what it found in them, in the same order.
struct Lane<H> {
    jobs: SyncSender<Job<H>>,
    done: Receiver<Prescanned<H>>,
}

/// A block opened ahead of its turn.
enum Ahead {
    /// Sent to the worker `lane`, with its header (checked in its turn).
    Sent {
        header: OpenedBlock<()>,
        lane: usize,
    },
    /// Opening it failed; returned in its turn.
    Failed(Error),
}

impl<F: Fs> Store<F> {
    /// Rebuilds from the blocks `indexes` with worker threads. `false`: did nothing (one
    /// thread configured, an `Fs` that must be used from one thread, too little to share, or
    /// no thread could be started: a wasm guest), and the caller rebuilds on this thread.
    pub(super) fn rebuild_on_threads(&mut self, rb: &mut Rebuild, indexes: &[u64]) -> Result<bool> {
        let estimate = (indexes.len() as u64).saturating_mul(self.cfg.block_size);
        let wanted = self.cfg.rebuild_threads.min(indexes.len()).min(MAX_WORKERS);
        if wanted < 2 || estimate < PIPELINE_MIN || !self.fs.parallel_reads() {
            return Ok(false);
        }
        // Asked only now: it reads the process's CPU affinity and cgroup quota, which a
        // rebuild that stays on this thread (every one on fault-fs, in the crash explorer's
        // millions) must not pay. On one CPU the workers would only take turns with this thread.
        let workers = wanted.min(thread::available_parallelism().map_or(1, |n| n.get()));
        if workers < 2 {
            return Ok(false);
        }
        thread::scope(|s| {
            let mut lanes = Vec::with_capacity(workers);
            for _ in 0..workers {
                let (jobs, job_rx) = sync_channel::<Job<F::File>>(1);
                let (done_tx, done) = sync_channel(1);
                let started = thread::Builder::new()
                    .name("seqstore-rebuild".into())
                    .spawn_scoped(s, move || {
                        let mut buf = Vec::new();
                        for job in job_rx {
                            if done_tx.send(prescan(job, &mut buf)).is_err() {
                                break;
                            }
                        }
                    });
                if started.is_err() {
                    break;
                }
                lanes.push(Lane { jobs, done });
            }
            if lanes.is_empty() {
                return Ok(false);
            }
            // (returning drops the lanes: the workers' queues close and they end)
            self.run_pipeline(rb, indexes, &lanes).map(|()| true)
        })
    }

    /// Applies the blocks in order, each opened ahead (by up to one block per lane) and
    /// scanned by its lane's worker.
    fn run_pipeline(
        &mut self,
        rb: &mut Rebuild,
        indexes: &[u64],
        lanes: &[Lane<F::File>],
    ) -> Result<()> {
        let mut ahead = VecDeque::with_capacity(lanes.len() + 1);
        let mut next = 0;
        for (i, &index) in indexes.iter().enumerate() {
            while next < indexes.len() && next <= i + lanes.len() {
                let lane = next % lanes.len();
                ahead.push_back(self.send_ahead(indexes[next], lanes, lane));
                next += 1;
            }
            let (header, lane) = match ahead.pop_front() {
                Some(Ahead::Sent { header, lane }) => (header, lane),
                Some(Ahead::Failed(e)) => return Err(e),
                None => break, // (every block is opened ahead of its turn)
            };
            let Some(mut pre) = lanes.get(lane).and_then(|l| l.done.recv().ok()) else {
                return Err(worker_gone(&header.path));
            };
            let (opened, ()) = header.with_file(pre.job.file);
            let Some((file, path, flen)) = self.admit_block(index, opened)? else {
                continue;
            };
            pre.job = Job { file, path, flen };
            let sb = self.apply_prescanned(rb, pre)?;
            self.finish_rebuilt_block(sb, index, i + 1 == indexes.len())?;
            // (as the single-threaded rebuild: the entry cache's bound kept as it goes)
            self.trim_entries();
        }
        Ok(())
    }

    /// Opens block `index` and sends it to the worker `lane`.
    fn send_ahead(&mut self, index: u64, lanes: &[Lane<F::File>], lane: usize) -> Ahead {
        let opened = match self.open_block_file(index) {
            Ok(o) => o,
            Err(e) => return Ahead::Failed(e),
        };
        let (header, file) = opened.with_file(());
        let job = Job {
            file,
            path: header.path.clone(),
            flen: header.flen,
        };
        match lanes.get(lane).map(|l| l.jobs.send(job)) {
            Some(Ok(())) => Ahead::Sent { header, lane },
            _ => Ahead::Failed(worker_gone(&header.path)),
        }
    }

    /// What a worker found in a block, applied as [`Self::rebuild_block`] applies its
    /// records: messages and other records in their order, through the same replay.
    fn apply_prescanned(
        &mut self,
        rb: &mut Rebuild,
        mut pre: Prescanned<F::File>,
    ) -> Result<ScannedBlock<F::File>> {
        let (pos, flen, path) = (self.blocks.len(), pre.job.flen, pre.job.path.clone());
        rb.replay.start_block();
        let out_of_order = self.report.out_of_order.len();
        // the store's id of each of the block's subjects, interned at its first message
        let mut ids = vec![u32::MAX; pre.names.len()];
        let mut entries = std::mem::take(&mut pre.entries);
        let (mut kept, mut ev, mut ttl) = (0, 0, 0);
        for k in 0..entries.len() {
            self.apply_events(rb, &mut entries[..kept], &pre, &mut ev, k)?;
            let Some(&e) = entries.get(k) else { break };
            let at = RecordAt {
                off: u64::from(e.off),
                flen,
                pos,
                path: &path,
            };
            while pre.ttls.get(ttl).is_some_and(|&(i, _)| i < k) {
                ttl += 1;
            }
            if !self.accept_message(rb, &at, e.seq, e.ts) {
                continue;
            }
            let subj = match ids.get_mut(e.subj as usize) {
                Some(id) if *id != u32::MAX => *id,
                Some(id) => {
                    *id = self.subjects.intern(name_of(&pre, e.subj)?);
                    *id
                }
                None => return Err(out_of_range(&path)),
            };
            if let Some(&(_, d)) = pre.ttls.get(ttl).filter(|&&(i, _)| i == k) {
                self.ttl.insert(e.seq, d);
            }
            entries[kept] = Entry { subj, ..e };
            kept += 1;
        }
        let n = entries.len();
        self.apply_events(rb, &mut entries[..kept], &pre, &mut ev, n)?;
        entries.truncate(kept);
        let end = std::mem::replace(&mut pre.end, Ok(ScanEnd::Clean))?;
        let skipped = std::mem::take(&mut pre.skipped);
        let pinned = !skipped.is_empty() || self.report.out_of_order.len() > out_of_order;
        Ok(ScannedBlock {
            file: pre.job.file,
            path,
            len: flen,
            entries,
            max_seq: pre.max_seq,
            last_crc: pre.last_crc,
            skipped,
            end,
            pinned,
        })
    }

    /// Applies the block's other records that come before its `k`-th message (from `*ev` on).
    fn apply_events(
        &mut self,
        rb: &mut Rebuild,
        entries: &mut [Entry],
        pre: &Prescanned<F::File>,
        ev: &mut usize,
        k: usize,
    ) -> Result<()> {
        while let Some(e) = pre.events.get(*ev).filter(|e| e.before <= k) {
            let at = RecordAt {
                off: e.off,
                flen: pre.job.flen,
                pos: self.blocks.len(),
                path: &pre.job.path,
            };
            self.visit_other(rb, entries, &at, &e.other)?;
            *ev += 1;
        }
        Ok(())
    }
}

impl<H> OpenedBlock<H> {
    /// The same block with `file` in place of its own, which is returned: `()` takes the file
    /// out (to a worker), the file given back puts it in again.
    fn with_file<G>(self, file: G) -> (OpenedBlock<G>, H) {
        let OpenedBlock {
            file: own,
            path,
            flen,
            header,
        } = self;
        let block = OpenedBlock {
            file,
            path,
            flen,
            header,
        };
        (block, own)
    }
}

/// The name of the block's subject `local`.
fn name_of<H>(pre: &Prescanned<H>, local: u32) -> Result<&str> {
    match pre.names.get(local as usize) {
        Some(n) => Ok(n),
        None => Err(out_of_range(&pre.job.path)),
    }
}

/// A worker's result that does not add up (a slip, never a disk's doing).
fn out_of_range(path: &str) -> Error {
    let e = io::Error::new(
        io::ErrorKind::InvalidData,
        "prescanned subject out of range",
    );
    Error::io("rebuild", path, e)
}

/// A worker ended without answering: it panicked (a bug, which `thread::scope` reports).
fn worker_gone(path: &str) -> Error {
    let e = io::Error::other("a rebuild worker thread stopped");
    Error::io("rebuild", path, e)
}
