//! Cells of the matrix (workload × policy × ablation × model), their results and the
//! demo's expected table.

use crate::*;

/// One cell of a matrix: a workload under a policy, an ablation and a model.
#[derive(Clone, Debug)]
pub struct CellSpec {
    /// The workload.
    pub workload: Workload,
    /// Policy name.
    pub policy: &'static str,
    /// The policy.
    pub sync: SyncPolicy,
    /// The ablation.
    pub ablation: Ablation,
    /// The crash model.
    pub model: Model,
    /// The exploration seed.
    pub seed: u64,
}

/// A violation in terms a reader understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    /// Recovered first sequence (0 if recovery failed).
    pub recovered_first: u64,
    /// Recovered last sequence.
    pub recovered_last: u64,
    /// The last sequence the workload had made durable.
    pub expected_last: u64,
    /// The operation whose effect was lost (or the last one before the crash).
    pub op: String,
    /// Its call site, `file:line`.
    pub call_site: String,
    /// The checker's message.
    pub message: String,
}

impl Example {
    fn from_violation(v: &Violation, expected_last: u64) -> Example {
        let num = |key: &str| -> u64 {
            v.message
                .split([' ', ';'])
                .find_map(|w| w.strip_prefix(key))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let (op, call_site) = match v.blame.first() {
            Some(b) => (b.op.clone(), b.call_site.clone()),
            None => (v.op.clone(), v.call_site.clone()),
        };
        Example {
            recovered_first: num("first="),
            recovered_last: num("last="),
            expected_last,
            op,
            call_site,
            message: v.message.clone(),
        }
    }
}

/// The outcome of one cell.
#[derive(Clone, Debug)]
pub struct CellResult {
    /// What ran.
    pub spec: CellSpec,
    /// The backend.
    pub backend: &'static str,
    /// The explorer's report.
    pub report: Report,
    /// The first violation, explained.
    pub example: Option<Example>,
}

/// Explores one cell. `progress` is forwarded to the explorer.
pub fn run_cell(
    backend: &dyn Backend,
    spec: &CellSpec,
    progress: Option<seqstore_fault_fs::ProgressFn>,
) -> CellResult {
    let cfg = config(spec.workload.block_size, spec.sync, spec.ablation);
    let mut ecfg = ExploreConfig::new(spec.model);
    ecfg.seed = spec.seed;
    ecfg.progress = progress;
    ecfg.max_violations = 20;
    // a torn overwrite with the write before it dropped is not in the enumerated set (which
    // keeps prefixes): random images find it
    ecfg.random_images_per_point = 24;
    let mut runner = Runner::new(backend, cfg.clone());
    let report = seqstore_fault_fs::explore(
        &ecfg,
        &spec.workload.steps,
        |fs, step, j| runner.step(fs, step, j),
        |img, ctx: &CrashCtx<'_, Event>| check_image(backend, &cfg, img, ctx.events),
    );
    let example = report.violations.first().map(|v| {
        // what the workload had made durable at that crash point, for the reader
        let mut rec = Runner::new(backend, cfg.clone());
        let events = seqstore_fault_fs::replay_image(
            &ecfg,
            &spec.workload.steps,
            |fs, step, j| rec.step(fs, step, j),
            v.crash_point,
            v.image,
        )
        .map(|r| r.events)
        .unwrap_or_default();
        Example::from_violation(v, Expect::from_events(&events).durable_last)
    });
    CellResult {
        spec: spec.clone(),
        backend: backend.name(),
        report,
        example,
    }
}

/// The seed scenario for every ablation × model: the demo's table.
pub fn demo_cells(seed: u64) -> Vec<CellSpec> {
    let w = workloads()
        .into_iter()
        .find(|w| w.name == "seed")
        .expect("seed");
    let mut out = Vec::new();
    for ablation in Ablation::ALL {
        for model in Model::ALL {
            out.push(CellSpec {
                workload: w.clone(),
                policy: "always",
                sync: SyncPolicy::Always,
                ablation,
                model,
                seed,
            });
        }
    }
    out
}

/// The whole crash matrix of the real store: every workload × policy × model.
pub fn matrix_cells(workload: Option<&str>, model: Option<Model>, seed: u64) -> Vec<CellSpec> {
    let mut out = Vec::new();
    for w in workloads() {
        if workload.is_some_and(|n| n != w.name) {
            continue;
        }
        for (pname, sync) in policies() {
            for m in Model::ALL {
                if model.is_some_and(|x| x != m) {
                    continue;
                }
                out.push(CellSpec {
                    workload: w.clone(),
                    policy: pname,
                    sync,
                    ablation: Ablation::Full,
                    model: m,
                    seed,
                });
            }
        }
    }
    out
}

/// A shared progress callback.
pub type Progress = Arc<dyn Fn(&seqstore_fault_fs::Progress) + Send + Sync>;

impl fmt::Display for CellResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<24} {:<9} {:<18} {:<8} {:<7} {:>6} crash points {:>7} images {:>5} violations",
            self.spec.workload.name,
            self.spec.policy,
            self.spec.ablation.name(),
            self.spec.model,
            self.backend,
            self.report.crash_points,
            self.report.images,
            self.report.violation_count
        )?;
        if let Some(e) = &self.report.workload_error {
            write!(f, "\n    workload error: {e}")?;
        }
        Ok(())
    }
}

/// What a demo cell (the seed scenario) must show for its ablation and model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// Zero violations.
    Clean,
    /// Violations.
    Violations,
    /// Violations, among them a recovery at first=0, last=0 (the production bug).
    ZeroZero,
}

impl Expected {
    /// The expectation for `ablation` under `model`: the real store is clean under both models;
    /// without the tombstone fsync the stream comes back at 0,0 under both; without directory
    /// fsyncs it breaks under posix only (ordered makes namespace operations durable at once).
    pub fn of(ablation: Ablation, model: Model) -> Expected {
        match (ablation, model) {
            (Ablation::Full, _) | (Ablation::NoDirSync, Model::Ordered) => Expected::Clean,
            (Ablation::NoTombstoneSync, _) => Expected::ZeroZero,
            _ => Expected::Violations,
        }
    }

    /// Whether a result meets this expectation.
    pub fn met_by(self, r: &Report) -> bool {
        if r.workload_error.is_some() {
            return false;
        }
        match self {
            Expected::Clean => r.violation_count == 0,
            Expected::Violations => r.violation_count > 0,
            Expected::ZeroZero => r
                .violations
                .iter()
                .any(|v| v.message.starts_with("recovered first=0 last=0;")),
        }
    }
}

/// `f` of every item, in the items' order, computed on as many threads as the machine has
/// cores: the cells of a matrix are independent, CPU-bound explorations, and a test binary
/// with one long test would otherwise leave all but one core idle.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers.min(items.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                out.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was computed (a worker panicked?)"))
        .collect()
}
