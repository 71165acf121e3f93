//! `seqstore crashcheck --random N`: random valid workloads through the crash explorer
//! (seqstore_crash_matrix::random), with a progress bar, a table or one JSON object, and the first
//! violation shrunk to a workload literal and the command that replays it.

use crate::lab::bar;
use anyhow::Result;
use seqstore_core::Ablation;
use seqstore_crash_matrix::random::{literal, run_campaign, Campaign, CampaignReport};
use seqstore_crash_matrix::Backend;
use seqstore_fault_fs::Model;
use serde_json::{json, Value};
use std::process::ExitCode;

/// What `crashcheck --random` was asked for.
pub struct Args<'a> {
    pub workloads: u64,
    pub first: u64,
    pub max_steps: usize,
    pub seed: u64,
    pub model: Option<&'a str>,
    pub ablation: &'a str,
    pub backend: &'a dyn Backend,
}

pub fn crashcheck_random(a: Args<'_>, as_json: bool) -> Result<ExitCode> {
    let models: Vec<Model> = a
        .model
        .map(|m| m.parse().map_err(|e| anyhow::anyhow!("{e:?}")))
        .transpose()?
        .into_iter()
        .collect();
    let ablation: Ablation = a.ablation.parse().map_err(anyhow::Error::msg)?;
    let c = Campaign {
        seed: a.seed,
        first: a.first,
        workloads: a.workloads,
        max_steps: a.max_steps,
        ablation,
        backend: a.backend,
        models,
        stop_at_first: true,
    };
    let start = std::time::Instant::now();
    let pb = bar(a.workloads);
    pb.set_message(format!("random workloads (seed {})", a.seed));
    let r = run_campaign(&c, |done, r| {
        pb.set_position(done);
        pb.set_message(format!(
            "{} crash points, {} images, {} violations",
            r.crash_points, r.images, r.violations
        ));
    });
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    if as_json {
        println!("{}", to_json(&r, &c, secs));
    } else {
        print_table(&r, &c, secs);
    }
    Ok(if r.violations == 0 && r.workload_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn to_json(r: &CampaignReport, c: &Campaign<'_>, secs: f64) -> Value {
    let first = r.first.as_ref().map(|f| {
        let v = f.result.report.violations.first();
        json!({
            "index": f.index,
            "workload_seed": f.workload_seed,
            "policy": f.result.spec.policy,
            "model": f.result.spec.model.to_string(),
            "message": v.map(|v| v.message.clone()),
            "violation": v.map(|v| v.to_string()),
            "steps": f.result.spec.workload.steps.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>(),
            "shrunk_steps": f.shrunk.steps.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>(),
            "block_size": f.shrunk.block_size,
            "shrunk_violations": f.shrunk_result.report.violation_count,
            "literal": literal(&f.shrunk, "random-regression"),
            "replay": format!("seqstore crashcheck --random 1 --seed {} --first {}", c.seed, f.index),
        })
    });
    json!({
        "seed": c.seed,
        "first": c.first,
        "backend": c.backend.name(),
        "ablation": c.ablation.name(),
        "workloads": r.workloads,
        "cells": r.cells,
        "crash_points": r.crash_points,
        "images": r.images,
        "violations": r.violations,
        "workload_errors": r.workload_errors,
        "seconds": secs,
        "images_per_s": r.images as f64 / secs.max(1e-9),
        "first_violation": first,
    })
}

fn print_table(r: &CampaignReport, c: &Campaign<'_>, secs: f64) {
    for e in &r.workload_errors {
        println!("workload error: {e}");
    }
    if let Some(f) = &r.first {
        println!("{}\n", f.describe(c.seed));
    }
    let per_min = 60.0 / secs.max(1e-9);
    println!(
        "{} random workloads from seed {} ({}, {} cells: each under 3 sync policies and the crash models): {} crash points, {} images, {} violations in {secs:.1}s ({:.0} workloads, {:.0} crash points, {:.0} images per minute)",
        r.workloads,
        c.seed,
        c.backend.name(),
        r.cells,
        r.crash_points,
        r.images,
        r.violations,
        r.workloads as f64 * per_min,
        r.crash_points as f64 * per_min,
        r.images as f64 * per_min,
    );
}
