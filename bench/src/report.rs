//! The report: samples per table and cell, medians, the goals with their measured ratios, a
//! table for people and one JSON object for machines.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::util::median;
use crate::BenchOpts;

/// How a table's numbers read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    PerSec,
    Ms,
    SecPerGib,
}

/// One cell: an implementation (or stream size) in a table, with every sample taken.
#[derive(Clone, Debug)]
pub(crate) struct Cell {
    pub(crate) name: String,
    pub(crate) samples: Vec<f64>,
}

/// One table of the report (one key of the JSON).
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub(crate) key: &'static str,
    pub(crate) title: &'static str,
    pub(crate) unit: Unit,
    pub(crate) cells: Vec<Cell>,
}

impl Table {
    pub(crate) fn new(key: &'static str, title: &'static str, unit: Unit, names: &[&str]) -> Self {
        Table {
            key,
            title,
            unit,
            cells: names
                .iter()
                .map(|n| Cell {
                    name: n.to_string(),
                    samples: Vec::new(),
                })
                .collect(),
        }
    }

    pub(crate) fn push(&mut self, name: &str, v: f64) {
        let c = self
            .cells
            .iter_mut()
            .find(|c| c.name == name)
            .expect("cell declared in Table::new");
        c.samples.push(v);
    }

    pub(crate) fn median(&self, name: &str) -> Option<f64> {
        self.cells
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| median(&c.samples))
    }
}

/// A goal of the issue, with its value measured in this run.
#[derive(Clone, Debug)]
pub struct Goal {
    /// Short key (`nosync_vs_baseline`, …).
    pub name: &'static str,
    /// What is divided by what (or the quantity, for the absolute goals).
    pub what: &'static str,
    /// The measured ratio (or quantity); `None` if a table it needs was not run.
    pub value: Option<f64>,
    /// `">="` or `"<="`.
    pub op: &'static str,
    /// The target.
    pub target: f64,
    /// For ratios of two cells with one sample per round: the per-round ratios (A_r / B_r,
    /// cells measured next to each other), as (median, min, max). Their spread shows how
    /// much the host moved during the run; `value` (the ratio of the medians) decides.
    pub paired: Option<(f64, f64, f64)>,
}

impl Goal {
    /// Whether the goal is met (`None`: not measured).
    pub fn pass(&self) -> Option<bool> {
        let v = self.value?;
        Some(match self.op {
            ">=" => v >= self.target,
            _ => v <= self.target,
        })
    }
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub(crate) opts: BenchOpts,
    /// Median µs of write 128 B + fdatasync, at the start and at the end of the run.
    pub fsync_probe_us: (Option<f64>, Option<f64>),
    pub(crate) tables: Vec<Table>,
    /// The goals, measured.
    pub goals: Vec<Goal>,
    /// Remarks on how the numbers were taken (and anything odd seen while taking them).
    pub notes: Vec<String>,
    /// What is not measured yet, and why.
    pub todo: Vec<String>,
    /// Wall time of the run.
    pub elapsed_s: f64,
    /// Bytes the run passed to `write(2)` (`/proc/self/io` wchar; where that is missing, the
    /// sizes of its tempdirs before removal).
    pub bytes_written: u64,
    /// Bytes the run sent to the disk, net of what was deleted before writeback
    /// (`/proc/self/io` write_bytes - cancelled_write_bytes; Linux only). This is the number
    /// that pushes the host into its slow-fsync state.
    pub disk_bytes: Option<u64>,
    /// `/proc/loadavg` (1 minute) at the start and at the end: other work on the machine.
    pub loadavg: (Option<f64>, Option<f64>),
}

fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M/s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k/s", v / 1e3)
    } else {
        format!("{v:.0} /s")
    }
}

fn fmt_val(unit: Unit, v: Option<f64>) -> String {
    match (unit, v) {
        (_, None) => "-".into(),
        (Unit::PerSec, Some(v)) => fmt_rate(v),
        (Unit::Ms, Some(v)) => format!("{v:.3} ms"),
        (Unit::SecPerGib, Some(v)) => format!("{v:.3} s/GiB"),
    }
}

fn fmt_goal(v: f64) -> String {
    if v >= 1e5 {
        fmt_rate(v)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn round(v: f64) -> Value {
    // 4 significant digits are more than the run-to-run noise
    if v == 0.0 || !v.is_finite() {
        return json!(v);
    }
    let mag = v.abs().log10().floor() as i32;
    let f = 10f64.powi(3 - mag);
    json!((v * f).round() / f)
}

impl BenchReport {
    /// The table of a JSON key, if it exists.
    fn table_of(&self, key: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.key == key)
    }

    /// Median of one cell (`table` a JSON key, `cell` a key inside it).
    pub fn median(&self, table: &str, cell: &str) -> Option<f64> {
        self.table_of(table)?.median(cell)
    }

    /// One JSON object: every table's medians under the keys of the issue (null where not
    /// measured), `ratios` (each goal's measured value, target and pass), `samples` (every
    /// sample behind each median), `meta` (sizes, repetitions, bytes written, time, notes,
    /// TODOs).
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert(
            "fsync_probe_us".into(),
            json!({"start": self.fsync_probe_us.0.map(round),
                   "end": self.fsync_probe_us.1.map(round)}),
        );
        let mut samples = Map::new();
        for t in &self.tables {
            let mut m = Map::new();
            let mut s = Map::new();
            for c in &t.cells {
                m.insert(
                    c.name.clone(),
                    median(&c.samples).map_or(Value::Null, round),
                );
                s.insert(
                    c.name.clone(),
                    Value::Array(c.samples.iter().map(|&v| round(v)).collect()),
                );
            }
            o.insert(t.key.into(), Value::Object(m));
            samples.insert(t.key.into(), Value::Object(s));
        }
        let mut ratios = Map::new();
        for g in &self.goals {
            ratios.insert(
                g.name.into(),
                json!({"what": g.what, "value": g.value.map(round), "op": g.op,
                       "target": g.target, "pass": g.pass(),
                       "per_round": g.paired.map(|(m, lo, hi)|
                           json!({"median": round(m), "min": round(lo), "max": round(hi)}))}),
            );
        }
        o.insert("ratios".into(), Value::Object(ratios));
        o.insert("samples".into(), Value::Object(samples));
        let op = &self.opts;
        o.insert(
            "meta".into(),
            json!({
                "quick": op.quick,
                "reps": op.reps,
                "payload_bytes": op.payload_len,
                "subject_bytes": 16,
                "nosync_msgs": op.nosync_msgs,
                "every_msgs": op.every_msgs,
                "sync_batch": op.sync_batch,
                "always_secs": op.always_secs,
                "small_msgs": op.small_msgs,
                "big_msgs": op.big_msgs,
                "gets": op.gets,
                "elapsed_s": round(self.elapsed_s),
                "bytes_written_mib": round(self.bytes_written as f64 / (1u64 << 20) as f64),
                "disk_write_mib": self.disk_bytes.map(|b| round(b as f64 / (1u64 << 20) as f64)),
                "loadavg_1m": {"start": self.loadavg.0, "end": self.loadavg.1},
                "notes": self.notes,
                "todo": self.todo,
            }),
        );
        Value::Object(o)
    }

    /// A readable table: each cell's median, min and max, then the goals.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let op = &self.opts;
        let _ = writeln!(
            s,
            "seqstore bench ({}): {} rounds, {} B payloads, 16 B subjects; {:.1} s, {:.0} MiB written ({} MiB to disk)",
            if op.quick { "quick" } else { "default" },
            op.reps,
            op.payload_len,
            self.elapsed_s,
            self.bytes_written as f64 / (1u64 << 20) as f64,
            self.disk_bytes.map_or("?".into(), |b| format!("{:.0}", b as f64 / (1u64 << 20) as f64)),
        );
        let _ = writeln!(
            s,
            "fsync probe (write 128 B + fdatasync, median): start {} µs, end {} µs; load average {} / {}",
            self.fsync_probe_us.0.map_or("-".into(), |v| format!("{v:.0}")),
            self.fsync_probe_us.1.map_or("-".into(), |v| format!("{v:.0}")),
            self.loadavg.0.map_or("-".into(), |v| format!("{v:.2}")),
            self.loadavg.1.map_or("-".into(), |v| format!("{v:.2}")),
        );
        let _ = writeln!(
            s,
            "\n{:<36} {:>14} {:>14} {:>14} {:>3}",
            "", "median", "min", "max", "n"
        );
        for t in &self.tables {
            let _ = writeln!(s, "{}  [{}]", t.title, t.key);
            for c in &t.cells {
                let min = c.samples.iter().copied().reduce(f64::min);
                let max = c.samples.iter().copied().reduce(f64::max);
                let _ = writeln!(
                    s,
                    "  {:<34} {:>14} {:>14} {:>14} {:>3}",
                    c.name,
                    fmt_val(t.unit, median(&c.samples)),
                    fmt_val(t.unit, min),
                    fmt_val(t.unit, max),
                    c.samples.len()
                );
            }
        }
        let _ = writeln!(
            s,
            "\n{:<22} {:<42} {:>10} {:>9}  {:<7} per round (min..max)",
            "goal", "measured as", "value", "target", "result"
        );
        for g in &self.goals {
            let _ = writeln!(
                s,
                "{:<22} {:<42} {:>10} {:>9}  {:<7} {}",
                g.name,
                g.what,
                g.value.map_or("-".into(), fmt_goal),
                format!("{} {}", g.op, fmt_goal(g.target)),
                match g.pass() {
                    Some(true) => "pass",
                    Some(false) => "FAIL",
                    None => "not run",
                },
                g.paired.map_or(String::new(), |(_, lo, hi)| format!(
                    "{}..{}",
                    fmt_goal(lo),
                    fmt_goal(hi)
                ))
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(s, "\nnotes:");
            for n in &self.notes {
                let _ = writeln!(s, "  - {n}");
            }
        }
        if !self.todo.is_empty() {
            let _ = writeln!(s, "\nTODO:");
            for n in &self.todo {
                let _ = writeln!(s, "  - {n}");
            }
        }
        s
    }
}
