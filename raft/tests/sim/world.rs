//! The simulated cluster: three nodes, each on its own fault-fs filesystem, in one process on
//! one thread with tokio's paused clock; faults, client operations and checks drawn from one
//! seed.

use super::book::{diff, Book, ConsumerAcked, ConsumerOp, Purged, Removal};
use super::deferred::DeferredLog;
use super::eager::{EagerLog, EagerSm};
use super::net::{Factory, Net, NodeRaft, SimLog, Up, Weather};
use anyhow::{anyhow, bail, Result};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{BasicNode, Config, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use seqstore_core::Fs;
use seqstore_fault_fs::{FaultFs, FaultKind, Model, Rng};
use seqstore_raft::log::Ablation;
use seqstore_raft::runtime::with_seed;
use seqstore_raft::sharedfs::{SharedFs, SubFs};
use seqstore_raft::streams::SmAblation;
use seqstore_raft::types::{AckPolicy, ConsumerConfig};
use seqstore_raft::{
    LogConfig, LogStore, Op, Request, Response, StreamConfig, StreamStateMachine, TypeConfig,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type NodeFs = SubFs<FaultFs>;
pub const IDS: [u64; 3] = [1, 2, 3];

/// A run's parameters.
#[derive(Clone, Debug)]
pub struct Opts {
    pub seed: u64,
    pub steps: usize,
    /// A log durability ablation (the negative controls), or `Ablation::Full`.
    pub ablation: Ablation,
    /// A state machine durability ablation (a negative control), or none.
    pub sm_ablation: Option<SmAblation>,
    /// Steps whose action is skipped (time still passes): what shrinking removes. Each step
    /// draws from its own generator, so skipping one leaves the others' actions unchanged.
    pub skip: BTreeSet<usize>,
    /// Election timeouts from the run's seed (`runtime::with_seed`); `false`: from the OS,
    /// as `openraft::TokioRuntime` does (what `unseeded_elections_diverge` shows matters).
    pub seeded_elections: bool,
    /// The negative control "a state machine that applies before commit" (`eager.rs`).
    pub eager_apply: bool,
    /// Inject disk errors (EIO on a node's next file operations; the node may stop, and is
    /// restarted like a killed process). `sim_seeds` turns them on unless
    /// `SEQSTORE_SIM_DISK_ERRORS=0`; the fixed schedules set them as they were found.
    pub disk_errors: bool,
    /// Purge the log without waiting for the state machine's durable snapshot (how the
    /// crate ran before `LogStore::with_snapshot_floor`): shows openraft's purge-before-install.
    pub no_floor: bool,
    /// The log as the threaded adapter behaves: `append` returns before its fsync, which
    /// comes up to `deferred_flush_ms` later (each incarnation its own latency;
    /// `deferred.rs`). 0: inline (fsync before return).
    pub deferred_flush_ms: u64,
    /// The election timeout's lower bound, ms (the upper is twice it; heartbeats every 50
    /// ms). A leader sends nothing while its own log fsync is in flight (openraft 0.9 awaits
    /// it), so fsyncs slower than this depose leaders faster than they lead (README, "Slow
    /// fsyncs"). `SEQSTORE_SIM_ELECTION_MS`, else 150.
    pub election_timeout_ms: u64,
    /// Bit rot (opt-in, `SEQSTORE_SIM_BIT_ROT=1`): one node's power is cut and a bit of one
    /// of its synced log blocks flipped before it restarts, one node at a time.
    pub bit_rot: bool,
    /// Consumer requests in the client mix (adds, pulls, acks, about a quarter of the
    /// requests); `false`: the mix before consumers, for the shrunk schedules that predate
    /// them.
    pub consumers: bool,
    /// Appends in batches too (`Op::Batch` of 2 to 4 appends, one in five appends: what a
    /// server's `Batcher` proposes); `false`: the mix before batches.
    pub batches: bool,
}

impl Opts {
    pub fn new(seed: u64, steps: usize, ablation: Ablation) -> Self {
        Opts {
            seed,
            steps,
            ablation,
            sm_ablation: None,
            skip: BTreeSet::new(),
            seeded_elections: true,
            eager_apply: false,
            disk_errors: false,
            no_floor: std::env::var_os("SEQSTORE_SIM_NO_FLOOR").is_some(),
            deferred_flush_ms: std::env::var("SEQSTORE_SIM_DEFERRED_FLUSH_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            election_timeout_ms: std::env::var("SEQSTORE_SIM_ELECTION_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(150),
            bit_rot: std::env::var_os("SEQSTORE_SIM_BIT_ROT").is_some_and(|v| v == "1"),
            consumers: true,
            batches: true,
        }
    }
}

/// What a run did.
#[derive(Debug)]
pub struct Outcome {
    pub hash: u64,
    /// The step of the first violation, if any.
    pub failed_at: Option<usize>,
    pub violations: Vec<String>,
    pub events: Vec<String>,
    pub stats: String,
}

struct Node {
    fs: FaultFs,
    inc: u64,
    raft: Option<NodeRaft>,
    sm: Option<StreamStateMachine<NodeFs>>,
    /// The running incarnation's log (its damage gate).
    log: Option<SimLog>,
    /// Restarted at this step.
    down_until: Option<usize>,
    /// A disk error was injected into this incarnation: it may stop (fail-stop), and is then
    /// restarted like a killed process.
    disk_error: bool,
}

pub struct World {
    opts: Opts,
    rng: Rng,
    net: Net,
    book: Arc<Mutex<Book>>,
    nodes: BTreeMap<u64, Node>,
    config: Arc<Config>,
    step: usize,
    /// The highest (term, node) each node was seen voting for.
    votes: BTreeMap<u64, (u64, u64)>,
    /// The highest log index a leader saw each node match.
    matched: BTreeMap<u64, u64>,
    counts: BTreeMap<&'static str, u64>,
    /// When the run began (simulated).
    start: tokio::time::Instant,
}

fn raft_config(election_timeout_ms: u64) -> Config {
    Config {
        cluster_name: "sim".into(),
        heartbeat_interval: 50,
        election_timeout_min: election_timeout_ms,
        election_timeout_max: 2 * election_timeout_ms,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(10),
        max_in_snapshot_log_to_keep: 2,
        ..Config::default()
    }
    .validate()
    .expect("valid config")
}

/// `Raft::new`, with openraft's random numbers from `seed` if given.
async fn new_raft<LS, SM>(
    id: u64,
    cfg: Arc<Config>,
    net: Factory,
    log: LS,
    sm: SM,
    seed: Option<u64>,
) -> Result<NodeRaft, openraft::error::Fatal<u64>>
where
    LS: RaftLogStorage<TypeConfig>,
    SM: RaftStateMachine<TypeConfig>,
{
    let new = Raft::new(id, cfg, net, log, sm);
    match seed {
        Some(s) => with_seed(s, new).await,
        None => new.await,
    }
}

fn mix(a: u64, b: u64) -> u64 {
    Rng::new(a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64()
}

impl World {
    /// A fresh cluster (call it on the simulation's runtime: its clock starts the run).
    pub fn new(opts: Opts) -> Self {
        let mut rng = Rng::new(opts.seed);
        let mut nodes = BTreeMap::new();
        for id in IDS {
            let model = if rng.chance(50) {
                Model::Posix
            } else {
                Model::Ordered
            };
            let fs = FaultFs::new(model);
            for d in ["log", "sm"] {
                fs.create_dir(d).expect("mkdir");
            }
            fs.sync_dir("").expect("sync");
            let node = Node {
                fs,
                inc: 0,
                raft: None,
                sm: None,
                log: None,
                down_until: None,
                disk_error: false,
            };
            nodes.insert(id, node);
        }
        let config = Arc::new(raft_config(opts.election_timeout_ms));
        World {
            net: Net::new(mix(opts.seed, 99)),
            rng,
            opts,
            book: Arc::default(),
            nodes,
            config,
            step: 0,
            votes: BTreeMap::new(),
            matched: BTreeMap::new(),
            counts: BTreeMap::new(),
            start: tokio::time::Instant::now(),
        }
    }

    fn event(&mut self, text: String) {
        let t = format!("step {} @{}: {text}", self.step, now_ms(self.start));
        self.net.lock().trace.event(t);
    }

    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    /// Starts a new incarnation of `id` on its filesystem as it is now.
    async fn start(&mut self, id: u64) -> Result<()> {
        let seed = self.opts.seed;
        let ablation = self.opts.ablation;
        let matched = self.matched.get(&id).copied().unwrap_or(0);
        let n = self.nodes.get_mut(&id).expect("node");
        n.inc += 1;
        let inc = n.inc;
        let shared = SharedFs(Arc::new(n.fs.clone()));
        let mut lc = LogConfig::default()
            .with_inline_io(true)
            .with_block_size(4096);
        lc.ablation = if self.opts.deferred_flush_ms > 0 {
            Ablation::AckBeforeSync // no fsync in append: `DeferredLog` does it
        } else {
            ablation
        };
        let log = LogStore::open(SubFs::new(shared.clone(), "log"), lc)
            .map_err(|e| anyhow!("node {id} does not reopen its log: {e}"))?;
        // the log as this process found it, before openraft runs: where a log goes back
        let (purged, last) =
            (log.state_now().await).map_err(|e| anyhow!("node {id} does not read its log: {e}"))?;
        let opened_at = last.or(purged).map_or(0, |l| l.index);
        let damage = log.damaged();
        if let Some(through) = damage {
            // recovery found damage to durable entries: the node holds its vote and its
            // candidacy until it has them again (`seqstore_raft::gate`); its log may go back
            // meanwhile, and what counts is that no acknowledged entry is lost (the book)
            self.matched.remove(&id);
            let t = format!(
                "step {} @{}: node {id} found damage: its log at {opened_at}, held until \
                 {through}",
                self.step,
                now_ms(self.start)
            );
            self.net.lock().trace.event(t);
        } else if opened_at < matched {
            (self.book.lock().unwrap().violations).push(format!(
                "node {id}'s log went back to {opened_at} at its restart, below index {matched}, \
                 which a leader saw it match"
            ));
        }
        let sm_fs = SubFs::new(shared, "sm");
        let sm = match self.opts.sm_ablation {
            Some(a) => StreamStateMachine::open_ablated(sm_fs, a),
            None => StreamStateMachine::open(sm_fs),
        };
        let sm = sm
            .map_err(|e| anyhow!("node {id} does not reopen its state machine: {e}"))?
            .with_inline_io(true);
        let log = if self.opts.no_floor {
            log
        } else {
            log.with_snapshot_floor(sm.snapshot_floor())
        };
        let gated = log.clone();
        let factory = self.net.factory(id, inc);
        let rseed = mix(mix(seed, id), inc);
        let seeded = self.opts.seeded_elections.then_some(rseed);
        let cfg = self.config.clone();
        let started = if self.opts.deferred_flush_ms > 0 {
            // each incarnation its own disk: a slow follower beside a fast leader
            let ms = Rng::new(mix(rseed, 7)).within(1, self.opts.deferred_flush_ms);
            let latency = Duration::from_millis(ms);
            let log = DeferredLog::new(log, latency);
            new_raft(id, cfg, factory, log, sm.clone(), seeded).await
        } else if self.opts.eager_apply {
            let early = Arc::default();
            let log = EagerLog {
                log,
                sm: sm.clone(),
                early: Arc::clone(&early),
            };
            let esm = EagerSm {
                sm: sm.clone(),
                early,
            };
            new_raft(id, cfg, factory, log, esm, seeded).await
        } else {
            new_raft(id, cfg, factory, log, sm.clone(), seeded).await
        };
        let raft = started.map_err(|e| anyhow!("node {id} does not start: {e}"))?;
        seqstore_raft::gate::hold_elections(&raft, &gated);
        n.raft = Some(raft.clone());
        n.sm = Some(sm);
        n.log = Some(gated.clone());
        n.down_until = None;
        n.disk_error = false;
        let up = Up { raft, log: gated };
        self.net.lock().up.insert(id, (inc, up));
        Ok(())
    }

    /// Stops the nodes at one instant: each filesystem becomes `image(fs)` (its live state for
    /// a killed process, a crash image for a power cut) before any of them runs again.
    async fn stop(&mut self, ids: &[u64], image: impl Fn(&FaultFs, u64) -> FaultFs) {
        let mut stopped = Vec::new();
        for &id in ids {
            let s = self.rng.next_u64();
            let n = self.nodes.get_mut(&id).expect("node");
            let next = image(&n.fs, s);
            n.fs = next;
            n.sm = None;
            n.log = None;
            stopped.extend(n.raft.take());
            self.net.lock().up.remove(&id);
        }
        for r in stopped {
            let _ = r.shutdown().await;
        }
    }

    fn up(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.raft.is_some())
            .map(|(i, _)| *i)
            .collect()
    }

    /// The node that believes it leads in the highest term.
    fn leader(&self) -> Option<(u64, NodeRaft)> {
        let mut best: Option<(u64, u64, NodeRaft)> = None;
        for (id, n) in &self.nodes {
            let Some(r) = &n.raft else { continue };
            let m = r.metrics().borrow().clone();
            if m.state == ServerState::Leader && best.as_ref().is_none_or(|b| m.current_term > b.1)
            {
                best = Some((*id, m.current_term, r.clone()));
            }
        }
        best.map(|(id, _, r)| (id, r))
    }

    /// Sampled: no node stopped, and no node's vote goes back, across its restarts too. (Two
    /// leaders in one term are legal here: openraft's default leader id is (term, node), and a
    /// node may vote for (t, 2) after (t, 1); what a vote must never do is go back, which is
    /// what a vote lost in a power cut does.)
    fn watch_votes(&mut self) {
        // one sample of every running node's metrics, for the vote and the log checks
        let sampled: Vec<(u64, RaftMetrics<u64, BasicNode>)> = (self.nodes.iter())
            .filter_map(|(id, n)| Some((*id, n.raft.as_ref()?.metrics().borrow().clone())))
            .collect();
        let mut found = Vec::new();
        for (id, m) in &sampled {
            match &m.running_state {
                Err(e) if !self.nodes[id].disk_error => {
                    found.push(format!("node {id} stopped: {e}"))
                }
                _ => {}
            }
            let v = (m.vote.leader_id.term, m.vote.leader_id.node_id);
            if v == (0, 0) && m.last_log_index.is_none() {
                // the placeholder a new `Raft` shows until its core has published its state
                // (a restarted node sampled at once): not a vote
                continue;
            }
            let seen = self.votes.entry(*id).or_insert(v);
            if v < *seen {
                found.push(format!("node {id}'s vote went back from {seen:?} to {v:?}"));
            }
            *seen = v.max(*seen);
        }
        self.book.lock().unwrap().violations.extend(found);
        self.watch_logs(&sampled);
    }

    /// No node's log goes back below what a leader saw it match as a follower, up to what the
    /// leader had made durable itself: a follower matches only entries it has made durable,
    /// and in a cluster of three two durable copies are a majority, so no election may cut
    /// them. openraft's own check of it (a panic, in debug builds only) is turned off by
    /// `loosen-follower-log-revert`, with which the leader sends such a follower its entries
    /// again: the simulation checks it here (on `sampled`, `watch_votes`' metrics) and at
    /// every restart (`start`).
    fn watch_logs(&mut self, sampled: &[(u64, RaftMetrics<u64, BasicNode>)]) {
        // nodes whose log found damage hold their vote until they have it again: their log
        // may be shorter than a leader last saw it meanwhile (the book checks the acks)
        let held: BTreeSet<u64> = (self.nodes.iter())
            .filter(|(_, n)| n.log.as_ref().is_some_and(|l| l.damaged().is_some()))
            .map(|(id, _)| *id)
            .collect();
        for (_, m) in sampled {
            let Some(rep) = &m.replication else { continue };
            // what the leader has made durable itself (its own entry is updated after its
            // log's flush): only up to there are a follower's match and the leader's copy two
            // durable copies; past it the leader may lose its copy and a new leader, elected
            // without the follower, may rightly overwrite the follower's
            let own = rep.get(&m.id).copied().flatten().map_or(0, |l| l.index);
            for (id, l) in rep
                .iter()
                .filter(|(id, _)| **id != m.id && !held.contains(id))
            {
                if let Some(l) = l {
                    let seen = self.matched.entry(*id).or_insert(0);
                    *seen = l.index.min(own).max(*seen);
                }
            }
        }
        let mut found = Vec::new();
        for (id, m) in sampled {
            let last = m.last_log_index;
            if m.vote.leader_id.term == 0 && last.is_none() {
                // the placeholder of a new `Raft` (see `watch_votes`)
                continue;
            }
            let matched = self.matched.get(id).copied().unwrap_or(0);
            if last.unwrap_or(0) < matched && !held.contains(id) {
                found.push(format!(
                    "node {id}'s log went back to {last:?}, below index {matched}, which a \
                     leader saw it match"
                ));
            }
        }
        self.book.lock().unwrap().violations.extend(found);
    }

    fn violated(&self) -> bool {
        !self.book.lock().unwrap().violations.is_empty()
    }

    pub async fn run(mut self) -> Outcome {
        let r = self.run_steps().await;
        if let Err(e) = r {
            self.book.lock().unwrap().violations.push(format!("{e:#}"));
        }
        for n in self.nodes.values_mut() {
            if let Some(r) = n.raft.take() {
                let _ = r.shutdown().await;
            }
        }
        let violations = std::mem::take(&mut self.book.lock().unwrap().violations);
        let st = self.net.lock();
        Outcome {
            hash: st.trace.hash(),
            failed_at: (!violations.is_empty()).then_some(self.step),
            violations,
            events: st.trace.events.clone(),
            stats: format!("{:?}, messages {:?}", self.counts, st.messages),
        }
    }

    async fn run_steps(&mut self) -> Result<()> {
        for id in IDS {
            self.start(id).await?;
        }
        let members: BTreeMap<u64, BasicNode> =
            IDS.iter().map(|i| (*i, BasicNode::new(""))).collect();
        let first = self.nodes[&1].raft.clone().expect("up");
        first.initialize(members).await?;
        self.quiesce().await?;
        for step in 0..self.opts.steps {
            self.step = step;
            self.rng = Rng::new(mix(self.opts.seed, 1000 + step as u64));
            let ms = self.rng.within(1, 200);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            self.reap_failed().await?;
            self.watch_votes();
            self.restart_due().await?;
            if !self.opts.skip.contains(&step) {
                self.act().await?;
            }
            if self.violated() {
                return Ok(());
            }
        }
        self.step = self.opts.steps;
        tokio::time::sleep(Duration::from_secs(5)).await;
        self.check().await?;
        self.event(format!("end: {}", self.status()));
        Ok(())
    }

    async fn restart_due(&mut self) -> Result<()> {
        let due: Vec<u64> = (self.nodes.iter())
            .filter(|(_, n)| n.down_until.is_some_and(|s| s <= self.step))
            .map(|(i, _)| *i)
            .collect();
        for id in &due {
            self.event(format!("restart node {id}"));
            self.start(*id).await?;
        }
        if !due.is_empty() {
            self.check().await?;
        }
        Ok(())
    }

    /// One random action.
    async fn act(&mut self) -> Result<()> {
        let all_up = self.up().len() == IDS.len();
        match self.rng.below(100) {
            0..=54 => self.client_op(),
            55..=64 => self.change_weather(),
            65..=71 => self.partition(),
            72..=77 if all_up => self.kill_one().await,
            78..=84 if all_up => self.power_cut_one().await,
            85..=87 => return self.power_cut_all().await,
            88..=90 if all_up && self.opts.disk_errors => self.disk_error(),
            91..=92 if all_up && self.opts.bit_rot => self.bit_rot().await,
            _ => {}
        }
        Ok(())
    }

    fn change_weather(&mut self) {
        let drop_pct = *self.rng.pick(&[0, 0, 5, 20, 50]);
        let max_delay_ms = *self.rng.pick(&[1, 5, 20, 100]);
        let dup_pct = *self.rng.pick(&[0, 0, 5, 20]);
        let mut st = self.net.lock();
        st.weather.drop_pct = drop_pct;
        st.weather.max_delay_ms = max_delay_ms;
        st.weather.dup_pct = dup_pct;
        drop(st);
        self.count("weather");
        self.event(format!(
            "weather: drop {drop_pct}%, delay ≤ {max_delay_ms} ms, duplicate {dup_pct}%"
        ));
    }

    fn partition(&mut self) {
        let heal = self.rng.chance(40);
        let id = *self.rng.pick(&IDS);
        let mut st = self.net.lock();
        st.weather.isolated.clear();
        if !heal {
            st.weather.isolated.insert(id);
        }
        drop(st);
        self.count("partition");
        self.event(if heal {
            "heal".into()
        } else {
            format!("isolate node {id}")
        });
    }

    /// One of the node's next file-system operations fails with EIO, or one time in three
    /// with ENOSPC (a failed fsync drops what it did not write, as Linux does for both).
    fn disk_error(&mut self) {
        let id = *self.rng.pick(&IDS);
        let k = self.rng.within(0, 40);
        // the kind from the draw already made: schedules found before ENOSPC keep their
        // operations and timing
        let (kind, name) = match k % 3 {
            0 => (FaultKind::Enospc, "ENOSPC"),
            _ => (FaultKind::Eio, "EIO"),
        };
        let n = self.nodes.get_mut(&id).expect("node");
        n.fs.fail_op(n.fs.op_count() + k, kind);
        n.disk_error = true;
        self.count("disk error");
        self.event(format!(
            "disk error: node {id}'s operation +{k} fails with {name}"
        ));
    }

    /// A node's power is cut, then one bit of one of its synced log blocks flips (what a disk
    /// returns for a sector that rotted); it restarts some steps later.
    async fn bit_rot(&mut self) {
        let id = *self.rng.pick(&IDS);
        let down = self.rng.within(0, 10) as usize;
        let pick = self.rng.next_u64();
        self.count("bit rot");
        self.stop(&[id], |fs, _| fs.crash()).await;
        let fs = &self.nodes[&id].fs;
        let what = match flip_a_bit(fs, "log/msgs", pick) {
            Ok(Some((file, at, bit))) => format!("{file} byte {at} bit {bit}"),
            Ok(None) => "nothing (no block)".into(),
            Err(e) => format!("nothing ({e})"),
        };
        self.event(format!(
            "bit rot: node {id}'s power cut, then {what} flipped; down {down} steps"
        ));
        self.nodes.get_mut(&id).expect("node").down_until = Some(self.step + down);
    }

    /// Restarts every node that stopped after an injected disk error (its process died; the
    /// page cache is kept, minus what the failed fsync dropped).
    async fn reap_failed(&mut self) -> Result<()> {
        let failed: Vec<u64> = (self.nodes.iter())
            .filter(|(_, n)| n.disk_error)
            .filter(|(_, n)| {
                n.raft
                    .as_ref()
                    .is_some_and(|r| r.metrics().borrow().running_state.is_err())
            })
            .map(|(i, _)| *i)
            .collect();
        for id in failed {
            let fs = &self.nodes[&id].fs;
            let what = (fs.trace().iter().rev())
                .find(|t| t.result.is_err())
                .map(|t| format!("{:?} {:?} at {:?}", t.kind, t.path, t.call_site));
            self.event(format!(
                "node {id} stopped after its disk error ({what:?}): restart"
            ));
            self.stop(&[id], |fs, _| fs.fork()).await;
            self.start(id).await?;
        }
        Ok(())
    }

    async fn kill_one(&mut self) {
        let id = *self.rng.pick(&IDS);
        let down = self.rng.within(0, 30) as usize;
        self.event(format!("kill node {id} (process), down {down} steps"));
        self.count("kill");
        self.stop(&[id], |fs, _| fs.fork()).await;
        self.nodes.get_mut(&id).expect("node").down_until = Some(self.step + down);
    }

    async fn power_cut_one(&mut self) {
        let id = *self.rng.pick(&IDS);
        let down = self.rng.within(0, 30) as usize;
        let pessimistic = self.rng.chance(30);
        let model = self.nodes[&id].fs.model();
        self.event(format!(
            "power cut node {id} ({model:?}, pessimistic {pessimistic}), down {down} steps"
        ));
        self.count("power cut one");
        self.stop(&[id], |fs, s| {
            if pessimistic {
                fs.crash()
            } else {
                fs.crash_seeded(s)
            }
        })
        .await;
        self.nodes.get_mut(&id).expect("node").down_until = Some(self.step + down);
    }

    async fn power_cut_all(&mut self) -> Result<()> {
        let pessimistic = self.rng.chance(30);
        self.event(format!("power cut all nodes (pessimistic {pessimistic})"));
        self.count("power cut all");
        let up = self.up();
        self.stop(&up, |fs, s| {
            if pessimistic {
                fs.crash()
            } else {
                fs.crash_seeded(s)
            }
        })
        .await;
        for id in IDS {
            self.nodes.get_mut(&id).expect("node").down_until = Some(self.step);
        }
        self.restart_due().await
    }

    /// Heals the network, restarts every node, waits until all applied the leader's last
    /// entry, and checks.
    async fn check(&mut self) -> Result<()> {
        self.quiesce().await?;
        let applied = self.applied_everywhere()?;
        let mut dumps = Vec::new();
        for (id, n) in &self.nodes {
            // the checker's own reads are not the workload's: a disk error still armed is
            // withdrawn rather than hit by the dump
            n.fs.clear_faults();
            let sm = n.sm.as_ref().expect("up after quiesce");
            dumps.push((*id, sm.dump()?));
        }
        let mut book = self.book.lock().unwrap();
        // every acknowledged entry is committed, so the leader has it and, quiesced, every
        // node applied it
        book.check_all_applied(applied);
        for (id, d) in &dumps {
            book.check_node(*id, applied, d);
        }
        let (a, da) = &dumps[0];
        for (b, db) in &dumps[1..] {
            if let Some(d) = diff(da, db) {
                book.violations.push(format!(
                    "nodes {a} and {b} disagree at index {applied}: {d}"
                ));
            }
        }
        let n = book.acked.len();
        let acks = (book.consumer_acked.iter())
            .filter(|a| matches!(a.what, ConsumerOp::Acked(_)))
            .count();
        let m = book.consumer_acked.len();
        drop(book);
        self.count("check");
        self.event(format!(
            "check at index {applied}: {n} acknowledged appends, {m} consumer requests ({acks} acks)"
        ));
        Ok(())
    }

    /// The index every node applied (they must agree after [`Self::quiesce`]).
    fn applied_everywhere(&self) -> Result<u64> {
        let idx: Vec<Option<u64>> = (self.nodes.values())
            .map(|n| {
                n.sm.as_ref()
                    .and_then(|s| s.last_applied())
                    .map(|l| l.index)
            })
            .collect();
        if idx.windows(2).any(|w| w[0] != w[1]) {
            bail!("applied indices differ after quiescence: {idx:?}");
        }
        Ok(idx[0].unwrap_or(0))
    }

    async fn quiesce(&mut self) -> Result<()> {
        self.net.lock().weather = Weather {
            drop_pct: 0,
            max_delay_ms: 5,
            ..Weather::default()
        };
        let down: Vec<u64> = IDS
            .iter()
            .copied()
            .filter(|i| self.nodes[i].raft.is_none())
            .collect();
        for id in down {
            self.start(id).await?;
        }
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.reap_failed().await?;
            self.watch_votes();
            if self.violated() {
                bail!("violation while quiescing");
            }
            if self.converged() {
                return Ok(());
            }
        }
        self.lost_everywhere();
        bail!(
            "the cluster did not converge in 30 s of healed network: {}",
            self.status()
        )
    }

    /// Acknowledged entries that no node's log holds any more.
    fn lost_everywhere(&self) {
        let longest = (self.nodes.values())
            .filter_map(|n| n.raft.as_ref())
            .map(|r| r.metrics().borrow().last_log_index.unwrap_or(0))
            .max()
            .unwrap_or(0);
        let mut book = self.book.lock().unwrap();
        let lost = (book.acked.iter())
            .filter(|(_, (_, i))| *i > longest)
            .map(|((s, q), (_, i))| format!("{s}/{q} at index {i}"))
            .collect::<Vec<_>>();
        if !lost.is_empty() {
            let v = format!(
                "{} acknowledged appends are in no node's log (longest log ends at {longest}): {}",
                lost.len(),
                lost.join(", ")
            );
            book.violations.push(v);
        }
    }

    fn status(&self) -> String {
        let mut out = Vec::new();
        for (id, n) in &self.nodes {
            let Some(r) = &n.raft else { continue };
            let m = r.metrics().borrow().clone();
            out.push(format!(
                "node {id}: {:?} term {} vote {} log {:?} applied {:?} snapshot {:?} purged {:?}",
                m.state,
                m.current_term,
                m.vote,
                m.last_log_index,
                m.last_applied,
                m.snapshot,
                m.purged
            ));
        }
        out.join("; ")
    }

    fn converged(&self) -> bool {
        let Some((_, leader)) = self.leader() else {
            return false;
        };
        let last = leader.metrics().borrow().last_log_index;
        self.nodes.values().all(|n| {
            n.raft.as_ref().is_some_and(|r| {
                let m = r.metrics().borrow().clone();
                m.last_applied.map(|l| l.index) == last && m.last_log_index == last
            })
        })
    }

    /// A random client request to the leader, answered in its own task.
    fn client_op(&mut self) {
        let Some((lid, raft)) = self.leader() else {
            self.event("client: no leader".into());
            return;
        };
        let (op, op_no) = self.random_op();
        self.count("client op");
        self.event(format!("client #{op_no} to node {lid}: {}", short(&op)));
        let start = self.start;
        let ts = now_ms(start) as i64 * 1_000_000;
        let book = Arc::clone(&self.book);
        let net = self.net.clone();
        tokio::spawn(async move {
            let req = Request { ts, op: op.clone() };
            let r = tokio::time::timeout(Duration::from_secs(3), raft.client_write(req)).await;
            let text = match r {
                Ok(Ok(resp)) => {
                    let idx = resp.log_id.index;
                    record(&mut book.lock().unwrap(), &op, &resp.data, idx);
                    format!("#{op_no} ok at index {idx}: {:?}", resp.data)
                }
                Ok(Err(e)) => format!("#{op_no} failed: {e}"),
                Err(_) => format!("#{op_no} timed out"),
            };
            net.lock()
                .trace
                .event(format!("@{}: {text}", now_ms(start)));
        });
    }

    fn random_op(&mut self) -> (Op, u64) {
        let mut b = self.book.lock().unwrap();
        b.next_op += 1;
        let no = b.next_op;
        let roll = self.rng.below(100);
        if b.streams.is_empty() || roll < 4 {
            b.next_stream += 1;
            let name = format!("s{}", b.next_stream);
            b.streams.push(name.clone());
            return (
                Op::CreateStream {
                    name,
                    config: StreamConfig::default(),
                },
                no,
            );
        }
        let stream = self.rng.pick(&b.streams).clone();
        let op = match roll {
            4..=5 if b.streams.len() > 1 => {
                b.streams.retain(|s| *s != stream);
                b.removals.push(Removal {
                    stream: stream.clone(),
                    seq: None,
                    index: None,
                });
                Op::DeleteStream { name: stream }
            }
            6..=13 => {
                let seq = self.rng.within(1, b.max_acked(&stream).max(1));
                b.removals.push(Removal {
                    stream: stream.clone(),
                    seq: Some(seq),
                    index: None,
                });
                Op::Delete { stream, seq }
            }
            14..=17 => {
                b.removals.push(Removal {
                    stream: stream.clone(),
                    seq: None,
                    index: None,
                });
                Op::Purge { stream }
            }
            18..=43 if self.opts.consumers => consumer_op(&mut self.rng, &mut b, roll, stream),
            _ if self.opts.batches && self.rng.chance(20) => {
                let ops = (0..self.rng.within(2, 4))
                    .map(|k| {
                        let s = self.rng.pick(&b.streams).clone();
                        append(s, format!("{}-{no}.{k}", self.opts.seed))
                    })
                    .collect();
                Op::Batch { ops }
            }
            _ => append(stream, format!("{}-{no}", self.opts.seed)),
        };
        (op, no)
    }
}

/// A consumer request (`roll` in 18..=43): an add of consumer `c` to `stream` if it has none
/// (18..=21), else a pull (22..=33) or an ack of a delivered message (34..=43) of a consumer
/// added before, whichever there is something for.
fn consumer_op(rng: &mut Rng, b: &mut Book, roll: u64, stream: String) -> Op {
    let unacked: Vec<(String, String)> = (b.unacked.iter())
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, _)| k.clone())
        .collect();
    let has_c = b.consumers.iter().any(|(s, _)| *s == stream);
    if b.consumers.is_empty() || (roll <= 21 && !has_c) {
        b.consumers.push((stream.clone(), "c".into()));
        let ack_policy = match rng.chance(30) {
            true => AckPolicy::All,
            false => AckPolicy::Explicit,
        };
        let config = ConsumerConfig {
            ack_policy,
            max_deliver: *rng.pick(&[0, 3]),
        };
        let name = "c".to_string();
        return Op::ConsumerAdd {
            stream,
            name,
            config,
        };
    }
    if roll >= 34 && !unacked.is_empty() {
        let (stream, name) = rng.pick(&unacked).clone();
        let stream_seq = *rng.pick(&b.unacked[&(stream.clone(), name.clone())]);
        return Op::ConsumerAck {
            stream,
            name,
            stream_seq,
        };
    }
    let (stream, name) = rng.pick(&b.consumers).clone();
    Op::ConsumerNext {
        stream,
        name,
        filter: ">".into(),
        batch: rng.within(1, 3) as u32,
        // redeliveries after 300 ms of the leaders' clocks
        ack_wait_ms: *rng.pick(&[0, 300]),
    }
}

/// Notes an acknowledged consumer request in the book.
fn record_consumer(b: &mut Book, op: &Op, resp: &Response, index: u64) {
    let (stream, name, what) = match (op, resp) {
        (Op::ConsumerAdd { stream, name, .. }, Response::Done) => (stream, name, ConsumerOp::Added),
        (Op::ConsumerNext { stream, name, .. }, Response::Delivered(d)) if !d.is_empty() => {
            let un = b.unacked.entry((stream.clone(), name.clone())).or_default();
            for x in d {
                if !un.contains(&x.stream_seq) {
                    un.push(x.stream_seq);
                }
            }
            let top = d.iter().map(|x| x.stream_seq).max().unwrap_or(0);
            (stream, name, ConsumerOp::Delivered(top))
        }
        (
            Op::ConsumerAck {
                stream,
                name,
                stream_seq,
            },
            Response::Done,
        ) => {
            if let Some(un) = b.unacked.get_mut(&(stream.clone(), name.clone())) {
                un.retain(|q| q != stream_seq);
            }
            (stream, name, ConsumerOp::Acked(*stream_seq))
        }
        _ => return,
    };
    b.consumer_acked.push(ConsumerAcked {
        stream: stream.clone(),
        name: name.clone(),
        index,
        what,
    });
}

/// A client's append of `payload` to `stream`.
fn append(stream: String, payload: String) -> Op {
    Op::Append {
        stream,
        subject: "sim.a".into(),
        headers: Vec::new(),
        payload: payload.into_bytes(),
        ttl_ms: 0,
    }
}

/// Notes an acknowledged request in the book (a batch's operations each as its own).
fn record(b: &mut Book, op: &Op, resp: &Response, index: u64) {
    if let (Op::Batch { ops }, Response::Batch(rs)) = (op, resp) {
        for (op, r) in ops.iter().zip(rs) {
            record(b, op, r, index);
        }
        return;
    }
    record_consumer(b, op, resp, index);
    match (op, resp) {
        (
            Op::Append {
                stream, payload, ..
            },
            Response::Seq(seq),
        ) => {
            b.ack_append(stream, *seq, payload.clone(), index);
        }
        (Op::Purge { stream }, Response::Removed(_)) => {
            // the floor: what was acknowledged before the purge was issued is conservative
            // only if no append acknowledged later got a lower sequence, which the check of
            // sequences handed out twice covers
            let floor = floor_at_issue(b, stream, index);
            set_index(b, stream, None, index);
            b.purged.push(Purged {
                stream: stream.clone(),
                floor,
                index,
            });
        }
        (Op::Delete { stream, seq }, _) => set_index(b, stream, Some(*seq), index),
        (Op::DeleteStream { name }, _) => set_index(b, name, None, index),
        _ => {}
    }
}

/// The highest acknowledged sequence of `stream` whose entry precedes the purge at `index`.
fn floor_at_issue(b: &Book, stream: &str, index: u64) -> u64 {
    (b.acked.iter())
        .filter(|((s, _), (_, i))| s == stream && *i < index)
        .map(|((_, q), _)| *q)
        .max()
        .unwrap_or(0)
}

fn set_index(b: &mut Book, stream: &str, seq: Option<u64>, index: u64) {
    if let Some(r) =
        (b.removals.iter_mut()).find(|r| r.stream == stream && r.seq == seq && r.index.is_none())
    {
        r.index = Some(index);
    }
}

fn short(op: &Op) -> String {
    match op {
        Op::Append {
            stream, payload, ..
        } => {
            format!("append {stream} {:?}", String::from_utf8_lossy(payload))
        }
        Op::Batch { ops } => {
            let each: Vec<String> = ops.iter().map(short).collect();
            format!("batch [{}]", each.join(", "))
        }
        other => format!("{other:?}"),
    }
}

/// Simulated milliseconds since `start` (tokio's paused clock).
fn now_ms(start: tokio::time::Instant) -> u128 {
    start.elapsed().as_millis()
}

/// Flips one bit, chosen by `pick`, of one of the files in `dir` (durably: written and
/// fsynced). `None`: no file with data.
fn flip_a_bit(fs: &FaultFs, dir: &str, pick: u64) -> std::io::Result<Option<(String, u64, u32)>> {
    let mut files: Vec<String> = (fs.read_dir(dir)?.into_iter())
        .filter(|e| !e.is_dir)
        .map(|e| format!("{dir}/{}", e.name))
        .collect();
    files.sort();
    let mut rng = Rng::new(pick);
    let path = match files.len() {
        0 => return Ok(None),
        n => files.swap_remove(rng.below(n as u64) as usize),
    };
    let f = fs.open(
        &path,
        seqstore_core::fs::OpenOptions::new().read(true).write(true),
    )?;
    let len = seqstore_core::fs::FsFile::len(&f)?;
    if len == 0 {
        return Ok(None);
    }
    let at = rng.below(len);
    let bit = rng.below(8) as u32;
    let mut b = [0u8; 1];
    seqstore_core::fs::FsFile::read_exact_at(&f, &mut b, at)?;
    b[0] ^= 1 << bit;
    seqstore_core::fs::FsFile::write_all_at(&f, &b, at)?;
    seqstore_core::fs::FsFile::sync_data(&f)?;
    Ok(Some((path, at, bit)))
}
