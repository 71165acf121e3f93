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
    /// Microseconds per call.
    Us,
    SecPerGib,
    MiB,
    /// Bytes a message (the memory table's entry rows, in a table of MiB).
    BytesPerMsg,
}

/// One cell: an implementation (or stream size) in a table, with every sample taken.
#[derive(Clone, Debug)]
pub(crate) struct Cell {
    pub(crate) name: String,
    /// Printed after the name in the text table ("embedded", "server through client
    /// (loopback)"): what kind of thing the row measures.
    pub(crate) label: Option<&'static str>,
    pub(crate) samples: Vec<f64>,
}

/// One table of the report (one key of the JSON).
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub(crate) key: &'static str,
    pub(crate) title: &'static str,
    pub(crate) unit: Unit,
    pub(crate) cells: Vec<Cell>,
    /// Keys of the JSON object that are not cells (a server's version, the stream sizes).
    pub(crate) extra: Vec<(&'static str, Value)>,
    /// The table's figures are bound by fsync latency: the text table prints the probe's
    /// state under it.
    pub(crate) fsync_bound: bool,
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
                    label: None,
                    samples: Vec::new(),
                })
                .collect(),
            extra: Vec::new(),
            fsync_bound: false,
        }
    }

    /// The same table, its figures marked as bound by fsync latency.
    pub(crate) fn fsync_bound(mut self) -> Self {
        self.fsync_bound = true;
        self
    }

    /// Labels the cells whose names start with `prefix`.
    pub(crate) fn label(mut self, prefix: &str, label: &'static str) -> Self {
        for c in self.cells.iter_mut().filter(|c| c.name.starts_with(prefix)) {
            c.label = Some(label);
        }
        self
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

/// A goal (a ratio and its target), with its value measured in this run.
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

/// A number for the goals line: integers from 100 up, else up to 3 decimals without trailing
/// zeros (`0.77`, `1.5`, `938000`).
pub(crate) fn fmt_num(v: f64) -> String {
    if !v.is_finite() || v.abs() >= 100.0 {
        return format!("{v:.0}");
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The goals' names by outcome (`passed`, `failed`, `not_measured`) and their [`goals_line`]:
/// the `goals` object of a run's JSON.
pub(crate) fn goals_json(goals: &[Goal]) -> Value {
    let names = |p: Option<bool>| -> Vec<&str> {
        goals
            .iter()
            .filter(|g| g.pass() == p)
            .map(|g| g.name)
            .collect()
    };
    json!({"passed": names(Some(true)), "failed": names(Some(false)),
           "not_measured": names(None), "line": goals_line(goals)})
}

/// The one-line summary a script reads, printed last: `goals: P passed, F failed, N not
/// measured`, then each failed goal as `name value<target` (a `>=` goal) or `name
/// value>target` (a `<=` goal), in parentheses, comma-separated.
pub fn goals_line(goals: &[Goal]) -> String {
    let failed: Vec<String> = goals
        .iter()
        .filter(|g| g.pass() == Some(false))
        .map(|g| {
            let cmp = if g.op == ">=" { '<' } else { '>' };
            let v = g.value.map_or("-".into(), fmt_num);
            format!("{} {v}{cmp}{}", g.name, fmt_num(g.target))
        })
        .collect();
    let passed = goals.iter().filter(|g| g.pass() == Some(true)).count();
    let unmeasured = goals.iter().filter(|g| g.pass().is_none()).count();
    let mut s = format!(
        "goals: {passed} passed, {} failed, {unmeasured} not measured",
        failed.len()
    );
    if !failed.is_empty() {
        s.push_str(&format!(" ({})", failed.join(", ")));
    }
    s
}

/// The state of the host's fsync, from the probe at the start and at the end (µs):
/// `fast` (both under 1 ms), `timer_tick` (one ~4 ms: the VM's idle-CPU wakeup, see the
/// notes), `slow` (over 1 ms otherwise), `changed` (one over twice the other), `unknown`.
pub fn fsync_probe_state(start: Option<f64>, end: Option<f64>) -> &'static str {
    let (Some(a), Some(b)) = (start, end) else {
        return "unknown";
    };
    if a.max(b) > 2.0 * a.min(b) {
        "changed"
    } else if [a, b].iter().any(|us| (3000.0..5000.0).contains(us)) {
        "timer_tick"
    } else if a.max(b) < 1000.0 {
        "fast"
    } else {
        "slow"
    }
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub(crate) opts: BenchOpts,
    /// Median µs of write 128 B + fdatasync, at the start and at the end of the run.
    pub fsync_probe_us: (Option<f64>, Option<f64>),
    pub(crate) tables: Vec<Table>,
    /// The goals (each a ratio with its target), measured.
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

pub(crate) fn fmt_val(unit: Unit, v: Option<f64>) -> String {
    match (unit, v) {
        (_, None) => "-".into(),
        (Unit::PerSec, Some(v)) => fmt_rate(v),
        (Unit::Ms, Some(v)) => format!("{v:.3} ms"),
        (Unit::Us, Some(v)) => format!("{v:.3} µs"),
        (Unit::SecPerGib, Some(v)) => format!("{v:.3} s/GiB"),
        (Unit::MiB, Some(v)) => format!("{v:.1} MiB"),
        (Unit::BytesPerMsg, Some(v)) => format!("{v:.2} B/msg"),
    }
}

pub(crate) fn fmt_goal(v: f64) -> String {
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

    /// One JSON object: every table's medians under the keys of `lib.rs`'s list (null where not
    /// measured), `ratios` (each goal's measured value, target and pass), `samples` (every
    /// sample behind each median), `meta` (sizes, repetitions, bytes written, time, notes,
    /// TODOs).
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert(
            "fsync_probe_us".into(),
            json!({"start": self.fsync_probe_us.0.map(round),
                   "end": self.fsync_probe_us.1.map(round),
                   "state": self.probe_state()}),
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
            for (k, v) in &t.extra {
                m.insert(k.to_string(), v.clone());
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
        o.insert("goals".into(), goals_json(&self.goals));
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
                "nats_reps": op.nats_reps,
                "nats_msgs": {"always_1": op.nats_msgs_1, "always_64": op.nats_msgs_64,
                              "default_64": op.nats_default_msgs},
                "mem_msgs": op.mem_msgs,
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

    /// [`goals_line`] of this run's goals.
    pub fn goals_line(&self) -> String {
        goals_line(&self.goals)
    }

    /// [`fsync_probe_state`] of this run's probes.
    pub fn probe_state(&self) -> &'static str {
        fsync_probe_state(self.fsync_probe_us.0, self.fsync_probe_us.1)
    }

    /// The probe's state and values, as printed under the fsync-bound tables.
    pub(crate) fn probe_text(&self) -> String {
        let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0} µs"));
        format!(
            "fsync probe {}: start {}, end {}",
            self.probe_state(),
            us(self.fsync_probe_us.0),
            us(self.fsync_probe_us.1)
        )
    }

    /// A readable table: each cell's median, min and max, then the goals, then the notes; the
    /// last line is [`BenchReport::goals_line`].
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
            "\n{:<50} {:>14} {:>14} {:>14} {:>3}",
            "", "median", "min", "max", "n"
        );
        for t in &self.tables {
            let _ = writeln!(s, "{}  [{}]", t.title, t.key);
            for c in &t.cells {
                let min = c.samples.iter().copied().reduce(f64::min);
                let max = c.samples.iter().copied().reduce(f64::max);
                // the memory table's bytes-a-message rows are not MiB
                let unit = match c.name.ends_with("_bytes_per_msg") {
                    true => Unit::BytesPerMsg,
                    false => t.unit,
                };
                let name = match c.label {
                    Some(l) => format!("{}, {l}", c.name),
                    None => c.name.clone(),
                };
                let _ = writeln!(
                    s,
                    "  {:<48} {:>14} {:>14} {:>14} {:>3}",
                    name,
                    fmt_val(unit, median(&c.samples)),
                    fmt_val(unit, min),
                    fmt_val(unit, max),
                    c.samples.len()
                );
            }
            if t.fsync_bound {
                let _ = writeln!(s, "  ({})", self.probe_text());
            }
        }
        let _ = writeln!(
            s,
            "\n{:<23} {:<42} {:>10} {:>9}  {:<7} per round (min..max)",
            "goal", "measured as", "value", "target", "result"
        );
        for g in &self.goals {
            let _ = writeln!(
                s,
                "{:<23} {:<42} {:>10} {:>9}  {:<7} {}",
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
        let _ = writeln!(s, "\n{}", self.goals_line());
        s
    }
}
