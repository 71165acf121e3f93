//! The state machine's snapshots under power loss (fault-fs explorer, both models): once
//! `build_snapshot` or `install_snapshot` returned, every crash recovers that snapshot or a
//! later one, whole (its metadata and data decode and agree), never an older one or a torn
//! file — openraft purges the log behind a snapshot, so a lost one would lose data.

use openraft::storage::RaftStateMachine;
use openraft::testing::log_id;
use openraft::{EntryPayload, RaftSnapshotBuilder};
use seqstore_fault_fs::{explore, CrashCtx, ExploreConfig, FaultFs, Journal, Model};
use seqstore_raft::{Entry, Request, StateMachine};

#[derive(Debug)]
enum Step {
    Apply(u64),
    Build,
    Reopen,
}

fn set(i: u64) -> Entry {
    Entry {
        log_id: log_id(1, 1, i),
        payload: EntryPayload::Normal(Request::Set {
            key: format!("k{i}"),
            value: "v".repeat(300), // snapshots span sectors: torn writes are possible
        }),
    }
}

struct Runner {
    rt: tokio::runtime::Runtime,
    sm: Option<StateMachine<FaultFs>>,
    next: u64,
    ablated: bool,
}

impl Runner {
    fn step(&mut self, fs: &FaultFs, s: &Step, j: &mut Journal<u64>) -> Result<(), String> {
        if self.sm.is_none() {
            let sm = if self.ablated {
                StateMachine::open_with_unsynced_snapshots(fs.clone())
            } else {
                StateMachine::open(fs.clone())
            };
            self.sm = Some(sm.map_err(|e| e.to_string())?);
        }
        let sm = self.sm.as_mut().expect("open");
        match s {
            Step::Apply(n) => {
                let es: Vec<Entry> = (self.next..self.next + n).map(set).collect();
                self.next += n;
                self.rt.block_on(sm.apply(es)).map_err(|e| e.to_string())?;
            }
            Step::Build => {
                let mut b = self.rt.block_on(sm.get_snapshot_builder());
                let snap = self
                    .rt
                    .block_on(b.build_snapshot())
                    .map_err(|e| e.to_string())?;
                let last = snap.meta.last_log_id.map_or(0, |l| l.index + 1);
                j.note(fs, last); // a snapshot covering `last` entries is durable
            }
            Step::Reopen => self.sm = None,
        }
        Ok(())
    }
}

fn check(img: &FaultFs, built: &[u64]) -> Result<(), String> {
    let sm = StateMachine::open(img.clone()).map_err(|e| format!("open: {e}"))?;
    let st = sm.state();
    let have = st.last_applied.map_or(0, |l| l.index + 1);
    let want = built.iter().copied().max().unwrap_or(0);
    if have < want {
        return Err(format!(
            "snapshot of {want} entries acknowledged, {have} recovered"
        ));
    }
    if st.kv.len() as u64 != have || (0..have).any(|i| !st.kv.contains_key(&format!("k{i}"))) {
        return Err(format!(
            "snapshot data does not match its last applied {have}"
        ));
    }
    Ok(())
}

/// Explores the snapshot workload; returns the report of each model.
fn run(ablated: bool) -> Vec<(Model, seqstore_fault_fs::Report)> {
    use Step::*;
    let steps = [Apply(3), Build, Apply(2), Build, Reopen, Apply(4), Build];
    let mut out = Vec::new();
    for model in Model::ALL {
        let mut r = Runner {
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
            sm: None,
            next: 0,
            ablated,
        };
        let report = explore(
            &ExploreConfig::new(model),
            &steps,
            |fs, s, j| r.step(fs, s, j),
            |img, ctx: &CrashCtx<'_, u64>| check(img, ctx.events),
        );
        assert!(
            report.workload_error.is_none(),
            "{:?}",
            report.workload_error
        );
        out.push((model, report));
    }
    out
}

#[test]
fn acknowledged_snapshots_survive_power_loss_under_both_models() {
    for (model, report) in run(false) {
        assert!(report.is_clean(), "{model:?}: {}", report.violations[0]);
        assert!(
            report.images > 10,
            "{model:?}: only {} images",
            report.images
        );
    }
}

#[test]
fn negative_control_unsynced_snapshots_are_found() {
    for (model, report) in run(true) {
        assert!(
            !report.is_clean(),
            "{model:?}: unsynced snapshots not found"
        );
        eprintln!(
            "unsynced snapshot {model:?}: {}",
            report.violations[0].message
        );
    }
}
