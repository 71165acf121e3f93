//! The `--replicated` report: a row per cell (median, min, max of its rounds), the goals, as
//! text, JSON and a Markdown page (docs/BENCHMARKS-REPLICATED.md).

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::ReplOpts;
use crate::markdown::Machine;
use crate::report::{fmt_goal, fmt_val, goals_json, goals_line, Goal, Unit};

/// Everything one `--replicated` run measured.
#[derive(Clone, Debug)]
pub struct ReplReport {
    pub(crate) opts: ReplOpts,
    pub(crate) nats_version: String,
    pub(crate) nats_bin: PathBuf,
    /// Per cell, its rounds' acknowledged appends/s, in the order measured.
    pub(crate) samples: Vec<(&'static str, Vec<f64>)>,
    /// The goals, measured.
    pub goals: Vec<Goal>,
    /// Wall time of the rounds, s.
    pub elapsed_s: f64,
    /// Median µs of write 128 B + fdatasync, before the rounds and after them.
    pub fsync_probe_us: (Option<f64>, Option<f64>),
    /// `/proc/loadavg` (1 minute) at the start and at the end.
    pub loadavg: (Option<f64>, Option<f64>),
}

/// What each cell is, for the table.
fn describe(key: &str) -> &'static str {
    match key {
        "nats_r3_always_1" => "NATS R3, sync_interval: always, 1 client",
        "nats_r3_always_64" => "NATS R3, sync_interval: always, 64 clients",
        "nats_r3_default_1" => "NATS R3, default config (no fsync before the ack), 1 client",
        "nats_r3_default_64" => "NATS R3, default config (no fsync before the ack), 64 clients",
        "seqstore_r3_1" => "seqstore 3-node cluster (log fsynced before commit), 1 client",
        "seqstore_r3_64" => "seqstore 3-node cluster (log fsynced before commit), 64 clients",
        "seqstore_r3_64_apart" => {
            "seqstore 3-node cluster, 64 clients with a connection each (no batching across them)"
        }
        "seqstore_server1_64" => {
            "seqstore-server, one node (log fsynced before commit), 64 clients"
        }
        "embedded_64" => "seqstore embedded, SharedStore, sync always, 64 threads",
        _ => "?",
    }
}

impl ReplReport {
    /// A cell's rounds, in order (empty if it was not measured).
    pub(crate) fn rounds(&self, key: &str) -> &[f64] {
        (self.samples.iter().find(|(k, _)| *k == key)).map_or(&[], |(_, v)| v.as_slice())
    }

    /// The median of a cell's rounds.
    pub(crate) fn median(&self, key: &str) -> Option<f64> {
        let (_, v) = self.samples.iter().find(|(k, _)| *k == key)?;
        crate::util::median(v)
    }

    fn spread(v: &[f64]) -> (f64, f64) {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    }

    /// What the service costs, reported (no target): (name, what, value).
    pub fn ratios(&self) -> Vec<(&'static str, &'static str, Option<f64>)> {
        let r = |a: &str, b: &str| self.median(a).zip(self.median(b)).map(|(a, b)| a / b);
        vec![
            (
                "server1_vs_embedded_64",
                "one-node server over HTTP / the store embedded (what the log and the network cost)",
                r("seqstore_server1_64", "embedded_64"),
            ),
            (
                "r3_vs_server1_64",
                "3-node cluster / one-node server (what replication costs)",
                r("seqstore_r3_64", "seqstore_server1_64"),
            ),
        ]
    }

    /// The fsync probe's state and values (every cell here is fsync-bound).
    fn probe_text(&self) -> String {
        let (a, b) = self.fsync_probe_us;
        let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0} µs"));
        let state = crate::report::fsync_probe_state(a, b);
        format!("fsync probe {state}: start {}, end {}", us(a), us(b))
    }

    /// One line per cell, the reported ratios and the goals line.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{}", self.probe_text());
        for (k, v) in &self.samples {
            let (lo, hi) = Self::spread(v);
            let f = |x: f64| fmt_val(Unit::PerSec, Some(x));
            let _ = writeln!(
                s,
                "{k:<22} {:>14}  (min {}, max {})  {}",
                f(crate::util::median(v).unwrap_or(0.0)),
                f(lo),
                f(hi),
                describe(k)
            );
        }
        for (name, what, v) in self.ratios() {
            let v = v.map_or("not measured".into(), fmt_goal);
            let _ = writeln!(s, "{name:<22} {v:>14}  {what}");
        }
        let _ = writeln!(s, "{}", goals_line(&self.goals));
        s
    }

    /// The run as JSON: every round of every cell, the goals, the run's facts.
    pub fn to_json(&self) -> Value {
        let mut cells = Map::new();
        for (k, v) in &self.samples {
            cells.insert(
                (*k).into(),
                json!({"rounds": v, "median": crate::util::median(v)}),
            );
        }
        json!({
            "unit": "acknowledged appends/s",
            "nats_server": {"version": self.nats_version, "bin": self.nats_bin},
            "opts": {"reps": self.opts.reps, "msgs_1": self.opts.msgs_1,
                     "msgs_64": self.opts.msgs_64, "max_secs": self.opts.max_secs},
            "cells": cells,
            "goals": goals_json(&self.goals),
            "ratios": self.ratios().iter().map(|(n, w, v)| json!({"name": n, "what": w, "value": v})).collect::<Vec<_>>(),
            "elapsed_s": self.elapsed_s,
            "fsync_probe_us": {"start": self.fsync_probe_us.0, "end": self.fsync_probe_us.1,
                               "state": crate::report::fsync_probe_state(self.fsync_probe_us.0, self.fsync_probe_us.1)},
            "loadavg_1m": {"start": self.loadavg.0, "end": self.loadavg.1},
        })
    }

    /// The page: how it was generated, the machine, the table, the goals.
    pub fn markdown(&self, machine: &Machine, command: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# seqstore benchmarks: the replicated stream\n");
        let _ = writeln!(
            s,
            "<!-- Generated by seqstore-bench. Do not edit by hand: run `{command}` again. -->\n\n\
             Generated by `{command}`; every figure comes from that one run. Acknowledged \
             appends/s on loopback: each client awaits its acknowledgement (NATS: the PubAck of \
             an R3 file stream) before its next append. The clients of a cell are tasks sharing \
             one client: one async-nats connection, one `seqstore_client::Client` (which sends \
             the appends queued while a request is out as one batch request); the `apart` row \
             gives each seqstore client its own. Every server process and the client share the \
             machine's cores.\n"
        );
        machine.header_rows(&mut s);
        let load = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "| run | {} rounds, 128 B payloads, {:.0} s, nats-server {} |\n| load (1 min) | {} at the start, {} at the end |\n| fsync | {} |\n",
            self.opts.reps,
            self.elapsed_s,
            self.nats_version,
            load(self.loadavg.0),
            load(self.loadavg.1),
            self.probe_text()
        );
        let _ = writeln!(s, "| cell | median | min | max |\n|---|---|---|---|");
        for (k, v) in &self.samples {
            let (lo, hi) = Self::spread(v);
            let f = |x: f64| fmt_val(Unit::PerSec, Some(x));
            let med = f(crate::util::median(v).unwrap_or(0.0));
            let _ = writeln!(s, "| {} | {med} | {} | {} |", describe(k), f(lo), f(hi));
        }
        let _ = writeln!(s, "\n| ratio (reported) | value |\n|---|---|");
        for (name, what, v) in self.ratios() {
            let v = v.map_or("not measured".into(), fmt_goal);
            let _ = writeln!(s, "| `{name}`: {what} | {v} |");
        }
        let _ = writeln!(s, "\n| goal | value | target |\n|---|---|---|");
        for g in &self.goals {
            let v = g.value.map_or("not measured".into(), fmt_goal);
            let _ = writeln!(
                s,
                "| `{}`: {} | {v} | {} {} |",
                g.name, g.what, g.op, g.target
            );
        }
        s
    }
}
