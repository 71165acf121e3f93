//! The crash lab's commands (feature `ablation`): `seqstore demo` and `seqstore crashcheck`.
//! They run the store with fsyncs removed on purpose, so they exist only in a build that asks
//! for store-core's ablation switches; the `seqstore` a user builds has neither.

use crate::random;
use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use seqstore_core::{Ablation, Config};
use seqstore_crash_matrix::{Backend, CellResult, CellSpec, Expected, Guest, Native};
use seqstore_fault_fs::Model;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// `seqstore demo`.
#[derive(clap::Args)]
pub(crate) struct DemoArgs {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Seed of the random crash images.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// The same purge on the real nats-server and on seqstore's CLI, under strace
    /// (`seqstore trace`), instead of the in-process table.
    #[arg(long)]
    nats: bool,
}

/// `seqstore crashcheck`.
#[derive(clap::Args)]
pub(crate) struct CrashcheckArgs {
    /// One workload, or all.
    #[arg(long, default_value = "all")]
    workload: String,
    /// One model (posix or ordered), or both.
    #[arg(long)]
    model: Option<String>,
    /// Seed of the random crash images.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Run with an fsync removed (full, no-tombstone-sync, no-dir-sync, skip:<site>).
    #[arg(long, default_value = "full")]
    ablation: String,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Run the store inside the wasm guest (fault-fs served by the host).
    #[arg(long)]
    guest: bool,
    /// Instead of the named workloads, explore N random valid workloads (each under every
    /// sync policy and model); `--seed` seeds them; the first violation is shrunk.
    #[arg(long, value_name = "N")]
    random: Option<u64>,
    /// With --random: start at workload I of the seed's sequence (replays one workload).
    #[arg(long, default_value_t = 0, value_name = "I")]
    first: u64,
    /// With --random: at most this many steps per workload.
    #[arg(long, default_value_t = 24)]
    max_steps: usize,
    /// With --random: through SharedStore (group commit) instead of the plain store.
    #[arg(long, conflicts_with = "guest")]
    shared: bool,
    /// With --random: on an encrypted (XChaCha20-Poly1305) and lz4-compressed store, natively
    /// or with --guest in the wasm guest.
    #[arg(long, conflicts_with = "shared")]
    encrypted: bool,
}

/// The `--encrypted` backends (their open counters seed the nonce prefixes).
static LAYERED: seqstore_crash_matrix::Layered = seqstore_crash_matrix::Layered::new();
static LAYERED_GUEST: seqstore_crash_matrix::LayeredGuest = seqstore_crash_matrix::LayeredGuest;

pub(crate) fn demo_cmd(a: DemoArgs) -> Result<ExitCode> {
    if a.nats {
        crate::demo_nats::demo_nats(a.json, a.seed)
    } else {
        demo(a.json, a.seed)
    }
}

pub(crate) fn crashcheck_cmd(a: CrashcheckArgs) -> Result<ExitCode> {
    let Some(n) = a.random else {
        return crashcheck(
            &a.workload,
            a.model.as_deref(),
            a.seed,
            &a.ablation,
            a.json,
            a.guest,
        );
    };
    if a.workload != "all" {
        bail!("--random explores random workloads: it takes no --workload");
    }
    let backend: &dyn Backend = if a.encrypted && a.guest {
        &LAYERED_GUEST
    } else if a.encrypted {
        &LAYERED
    } else if a.guest {
        &Guest
    } else if a.shared {
        &seqstore_crash_matrix::Shared
    } else {
        &Native
    };
    let args = random::Args {
        workloads: n,
        first: a.first,
        max_steps: a.max_steps,
        seed: a.seed,
        model: a.model.as_deref(),
        ablation: &a.ablation,
        backend,
    };
    random::crashcheck_random(args, a.json)
}

pub(crate) fn bar(len: u64) -> ProgressBar {
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    b.enable_steady_tick(Duration::from_millis(120));
    b
}

/// Runs cells with a progress bar (the explorer reports crash points as it goes).
fn run_cells(cells: &[(CellSpec, &dyn Backend)], label: &str) -> Vec<CellResult> {
    let pb = bar(cells.len() as u64);
    let mut out = Vec::new();
    for (spec, backend) in cells {
        let name = format!(
            "{label} {} {} {} {} {}",
            backend.name(),
            spec.workload.name,
            spec.policy,
            spec.ablation,
            spec.model
        );
        pb.set_message(name.clone());
        let pb2 = pb.clone();
        let progress: seqstore_crash_matrix::Progress =
            Arc::new(move |p: &seqstore_fault_fs::Progress| {
                pb2.set_message(format!(
                    "{name}: crash point {}/{}, {} images",
                    p.crash_points_done, p.crash_points, p.images
                ));
            });
        out.push(seqstore_crash_matrix::run_cell(
            *backend,
            spec,
            Some(progress),
        ));
        pb.inc(1);
    }
    pb.finish_and_clear();
    out
}

fn example_json(r: &CellResult) -> Value {
    match &r.example {
        None => Value::Null,
        Some(e) => json!({
            "recovered_first": e.recovered_first,
            "recovered_last": e.recovered_last,
            "expected_last": e.expected_last,
            "op": e.op,
            "call_site": e.call_site,
        }),
    }
}

fn demo(as_json: bool, seed: u64) -> Result<ExitCode> {
    // every cell natively, then the same cells with the store in the wasm guest
    let backends: [&dyn Backend; 2] = [&Native, &Guest];
    let cells: Vec<(CellSpec, &dyn Backend)> = backends
        .into_iter()
        .flat_map(|b| {
            seqstore_crash_matrix::demo_cells(seed)
                .into_iter()
                .map(move |c| (c, b))
        })
        .collect();
    let results = run_cells(&cells, "demo");
    let all_as_expected = results
        .iter()
        .all(|r| Expected::of(r.spec.ablation, r.spec.model).met_by(&r.report));
    if as_json {
        let rows: Vec<Value> = results
            .iter()
            .map(|r| {
                json!({
                    "variant": r.spec.ablation.name(),
                    "backend": r.backend,
                    "model": r.spec.model.to_string(),
                    "crash_points": r.report.crash_points,
                    "images": r.report.images,
                    "violations": r.report.violation_count,
                    "example": example_json(r),
                })
            })
            .collect();
        println!(
            "{}",
            json!({"scenario": "purge", "seed": seed, "as_expected": all_as_expected, "rows": rows})
        );
    } else {
        println!(
            "seqstore demo: the NATS purge bug, on a filesystem that forgets what was not fsynced"
        );
        println!(
            "scenario: append {} messages (sync: always), purge; power cut at every operation boundary,",
            seqstore_crash_matrix::SEED_K
        );
        println!("every crash image the model allows is recovered and checked (seed {seed})\n");
        println!(
            "{:<18} {:<7} {:<8} {:>12} {:>7} {:>10}  first violation",
            "variant", "backend", "model", "crash points", "images", "violations"
        );
        for r in &results {
            let first = match &r.example {
                None => "-".to_string(),
                Some(e) => format!(
                    "recovered ({},{}) but last {} was durable; lost: {} at {}",
                    e.recovered_first, e.recovered_last, e.expected_last, e.op, e.call_site
                ),
            };
            println!(
                "{:<18} {:<7} {:<8} {:>12} {:>7} {:>10}  {first}",
                r.spec.ablation.name(),
                r.backend,
                r.spec.model.to_string(),
                r.report.crash_points,
                r.report.images,
                r.report.violation_count
            );
        }
        println!();
        println!(
            "full: the real store; no-tombstone-sync: the purge's tombstone block is not fsynced"
        );
        println!("(NATS's default); no-dir-sync: no directory is fsynced (nats-server PR #7675).");
        println!("posix: unsynced data and unsynced names are lost; ordered: only unsynced data (LazyFS/ext4).");
        println!(
            "expected: full clean, no-tombstone-sync back at (0,0) under both, no-dir-sync broken under posix only: {}",
            if all_as_expected { "as measured" } else { "NOT MET" }
        );
    }
    Ok(if all_as_expected {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn crashcheck(
    workload: &str,
    model: Option<&str>,
    seed: u64,
    ablation: &str,
    as_json: bool,
    guest: bool,
) -> Result<ExitCode> {
    let model: Option<Model> = model
        .map(|m| m.parse().map_err(|e| anyhow::anyhow!("{e:?}")))
        .transpose()?;
    let ablation: Ablation = ablation.parse().map_err(anyhow::Error::msg)?;
    let wl = (workload != "all").then_some(workload);
    if let Some(w) = wl {
        if !seqstore_crash_matrix::workloads()
            .iter()
            .any(|x| x.name == w)
        {
            let names: Vec<_> = seqstore_crash_matrix::workloads()
                .iter()
                .map(|w| w.name)
                .collect();
            bail!("unknown workload {w:?}; known: {}", names.join(", "));
        }
    }
    let mut cells = seqstore_crash_matrix::matrix_cells(wl, model, seed);
    for c in &mut cells {
        c.ablation = ablation;
    }
    let start = std::time::Instant::now();
    let cells: Vec<(CellSpec, &dyn Backend)> = cells
        .into_iter()
        .map(|c| {
            (
                c,
                if guest {
                    &Guest as &dyn Backend
                } else {
                    &Native
                },
            )
        })
        .collect();
    let results = run_cells(&cells, "crashcheck");
    let secs = start.elapsed().as_secs_f64();
    let images: usize = results.iter().map(|r| r.report.images).sum();
    let violations: usize = results.iter().map(|r| r.report.violation_count).sum();
    let errors: Vec<&CellResult> = results
        .iter()
        .filter(|r| r.report.workload_error.is_some())
        .collect();
    if as_json {
        let rows: Vec<Value> = results
            .iter()
            .map(|r| {
                json!({
                    "name": r.spec.workload.name,
                    "policy": r.spec.policy,
                    "model": r.spec.model.to_string(),
                    "crash_points": r.report.crash_points,
                    "images": r.report.images,
                    "violations": r.report.violation_count,
                    "workload_error": r.report.workload_error,
                })
            })
            .collect();
        println!(
            "{}",
            json!({"images": images, "violations": violations, "images_per_s": images as f64 / secs.max(1e-9),
                   "seed": seed, "ablation": ablation.name(), "workloads": rows})
        );
    } else {
        for r in &results {
            println!("{r}");
            for v in r.report.violations.iter().take(3) {
                println!("    {}", v.to_string().replace('\n', "\n    "));
            }
        }
        println!(
            "\n{} cells, {images} crash images checked in {secs:.1}s ({:.0}/s), {violations} violations (seed {seed}, {ablation})",
            results.len(),
            images as f64 / secs.max(1e-9)
        );
    }
    Ok(if violations == 0 && errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The store commands' configuration: the default, with `--ablation` applied.
pub(crate) fn store_config(at: &seqstore_commands::Target<crate::CliExtra>) -> Result<Config> {
    let ablation: Ablation = at.extra.ablation.parse().map_err(anyhow::Error::msg)?;
    if at.extra.guest && ablation != Ablation::Full {
        bail!("--ablation is not available with --guest");
    }
    Ok(Config::default().with_ablation(ablation))
}
