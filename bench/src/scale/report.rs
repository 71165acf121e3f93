//! The `--scale` report: a row per measure and a column per size, the goals (largest size
//! against smallest), as text, JSON and a Markdown page (docs/BENCHMARKS-SCALE.md).

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::{ScaleOpts, SizeResult};
use crate::markdown::Machine;
use crate::report::{fmt_goal, goals_json, goals_line, Goal};

/// Everything one `--scale` run measured.
#[derive(Clone, Debug)]
pub struct ScaleReport {
    pub(crate) opts: ScaleOpts,
    /// One per size, in the order run.
    pub(crate) sizes: Vec<SizeResult>,
    /// The goals, measured.
    pub goals: Vec<Goal>,
    /// Wall time of the run, s.
    pub elapsed_s: f64,
    /// `/proc/loadavg` (1 minute) at the start and at the end.
    pub loadavg: (Option<f64>, Option<f64>),
}

/// A row of the table: its label, how a value prints, the value of a size.
type Row = (&'static str, fn(f64) -> String, fn(&SizeResult) -> f64);

fn mib(v: f64) -> String {
    format!("{v:.1} MiB")
}
fn kib(v: f64) -> String {
    format!("{v:.1} KiB")
}
fn gib(v: f64) -> String {
    format!("{:.2} GiB", v / (1u64 << 30) as f64)
}
fn secs(v: f64) -> String {
    format!("{v:.3} s")
}
fn ms(v: f64) -> String {
    format!("{v:.3} ms")
}
fn us(v: f64) -> String {
    format!("{v:.3} µs")
}
fn ratio(v: f64) -> String {
    format!("{v:.3}")
}
fn per_s(v: f64) -> String {
    crate::report::fmt_val(crate::report::Unit::PerSec, Some(v))
}

const ROWS: &[Row] = &[
    ("block files", gib, |r| r.block_bytes as f64),
    ("write, no sync (appends + drop), msgs/s", per_s, |r| {
        r.write_per_s
    }),
    ("peak RSS through the write (VmHWM)", mib, |r| {
        r.rss_write_mib
    }),
    ("peak RSS through the rebuild (VmHWM)", mib, |r| {
        r.rss_rebuild_mib
    }),
    ("peak RSS of the whole child (VmHWM)", mib, |r| {
        r.rss_peak_mib
    }),
    ("index.db", kib, |r| r.index_bytes as f64 / 1024.0),
    ("open from index.db (median of 3)", ms, |r| r.index_open_ms),
    (
        "open after a crash: 1,000 synced appends since index.db (median of 3)",
        ms,
        |r| r.crash_open_ms,
    ),
    ("rebuild: open without index.db", secs, |r| r.rebuild_s),
    ("read limit: read + crc32 every block byte", secs, |r| {
        r.read_limit_s
    }),
    (
        "rebuild_vs_read_limit (rate / read+crc32 rate)",
        ratio,
        |r| r.rebuild_vs_read_limit(),
    ),
    (
        "random gets, default 64 MiB block cache, msgs/s",
        per_s,
        |r| r.gets_per_s,
    ),
    ("num_pending (orders.eu.*) from a random seq", us, |r| {
        r.num_pending_us
    }),
    (
        "filtered_state (1 subject of 64) from a random seq",
        us,
        |r| r.filtered_state_us,
    ),
    ("purge (warm, opened from index.db)", ms, |r| r.purge_ms),
    ("child wall time", secs, |r| r.child_s),
];

/// A size as `10M`, `100k`, `1500`.
pub(crate) fn size_label(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1000 && n % 1000 == 0 => format!("{}k", n / 1000),
        n => n.to_string(),
    }
}

fn goal(
    name: &'static str,
    what: &'static str,
    op: &'static str,
    target: f64,
    v: Option<f64>,
) -> Goal {
    Goal {
        name,
        what,
        value: v,
        op,
        target,
        paired: None,
    }
}

/// The two sizes the goals compare: the next size down and the largest.
fn goal_pair(sizes: &[SizeResult]) -> Option<(&SizeResult, &SizeResult)> {
    let mut v: Vec<&SizeResult> = sizes.iter().collect();
    v.sort_by_key(|r| r.msgs);
    v.dedup_by_key(|r| r.msgs);
    let k = v.len();
    (k >= 2).then(|| (v[k - 2], v[k - 1]))
}

/// The goals: the largest size against the next size down (none with one size), and the
/// rebuild against the read limit at the largest size.
fn goals(sizes: &[SizeResult]) -> Vec<Goal> {
    let big = sizes.iter().max_by_key(|r| r.msgs);
    let pair = goal_pair(sizes);
    let r = |f: fn(&SizeResult) -> f64, inv: bool| {
        pair.map(|(s, b)| if inv { f(s) / f(b) } else { f(b) / f(s) })
    };
    vec![
        goal(
            "scale_rss_big_vs_small",
            "peak RSS (VmHWM of its child): largest / next size down",
            "<=",
            1.3,
            r(|x| x.rss_peak_mib, false),
        ),
        goal(
            "scale_index_open_big_vs_small",
            "open from index.db, time: largest / next size down",
            "<=",
            2.0,
            r(|x| x.index_open_ms, false),
        ),
        goal(
            "crash_open_vs_clean_open",
            "open after a crash (1,000 appends since index.db) / open from index.db, largest size",
            "<=",
            3.0,
            big.map(|b| b.crash_open_ms / b.index_open_ms.max(1e-9)),
        ),
        goal(
            "scale_crash_open_big_vs_small",
            "open after a crash, time: largest / next size down",
            "<=",
            2.0,
            r(|x| x.crash_open_ms, false),
        ),
        goal(
            "scale_gets_small_vs_big",
            "random gets, rate: next size down / largest (how many times slower a get is)",
            "<=",
            2.0,
            r(|x| x.gets_per_s, true),
        ),
        goal(
            "scale_num_pending_big_vs_small",
            "num_pending from a random seq, time: largest / next size down",
            "<=",
            2.0,
            r(|x| x.num_pending_us, false),
        ),
        goal(
            "scale_filtered_state_big_vs_small",
            "filtered_state from a random seq, time: largest / next size down",
            "<=",
            2.0,
            r(|x| x.filtered_state_us, false),
        ),
        goal(
            "scale_rebuild_vs_read_limit",
            "open without index.db at the largest size: rate / read+crc32 rate",
            ">=",
            0.6,
            big.map(SizeResult::rebuild_vs_read_limit),
        ),
    ]
}

impl ScaleReport {
    pub(crate) fn new(
        opts: ScaleOpts,
        sizes: Vec<SizeResult>,
        elapsed_s: f64,
        loadavg: (Option<f64>, Option<f64>),
    ) -> Self {
        ScaleReport {
            goals: goals(&sizes),
            opts,
            sizes,
            elapsed_s,
            loadavg,
        }
    }

    /// [`goals_line`] of this run's goals.
    pub fn goals_line(&self) -> String {
        goals_line(&self.goals)
    }

    /// Consecutive pairs of sizes (by message count): the ratio columns.
    fn pairs(&self) -> Vec<(&SizeResult, &SizeResult)> {
        let mut v: Vec<&SizeResult> = self.sizes.iter().collect();
        v.sort_by_key(|r| r.msgs);
        v.dedup_by_key(|r| r.msgs);
        v.windows(2).map(|w| (w[0], w[1])).collect()
    }

    fn ratio_headers(&self) -> Vec<String> {
        self.pairs()
            .iter()
            .map(|(a, b)| format!("{} / {}", size_label(b.msgs), size_label(a.msgs)))
            .collect()
    }

    /// The notes under the table: how each row was taken.
    fn notes(&self) -> Vec<String> {
        vec![
            "each size runs in a child process of its own (this binary re-executed), so its \
             peak RSS (VmHWM from /proc/self/status) is that size's alone; the child writes, \
             rebuilds, opens from index.db, reads and purges the stream in that order"
                .into(),
            "messages: 128 B random payloads, 64 subjects of 16 B in turn, wall-clock \
             timestamps; default Config with SyncPolicy::Never (writes buffered, no fsync)"
                .into(),
            "rebuild and read limit: after an untimed read of every block file (the page cache \
             holds the stream as far as the machine's memory allows; when it does not, both \
             read from the disk); one sample each"
                .into(),
            format!(
                "gets: up to {} uniformly random sequences (20 s at most) after a tenth as \
                 many untimed, default Config (64 MiB block cache, 8 MiB entry cache: the peak \
                 RSS is the store's own, not a cache of the stream); num_pending / \
                 filtered_state: up to {} calls each (20 s at most) after a tenth as many \
                 untimed",
                self.opts.gets, self.opts.calls
            ),
            "goals compare the largest size with the next size down: times as larger / \
             smaller; gets as the smaller size's rate / the larger's, so ≤ 2 means a get is no \
             more than twice as slow at the largest size. Ratio columns: each size over the \
             one before it"
                .into(),
            "peak RSS of the whole child includes the default caches once full (64 MiB block \
             cache, 8 MiB entry cache); the rows through the write and through the rebuild \
             show what grows with the stream before the gets fill the block cache"
                .into(),
        ]
    }

    /// One JSON object: `scale` (per size: every measure), `ratios` (each goal's value,
    /// target and pass), `goals` (names by outcome, the goals line), `meta`.
    pub fn to_json(&self) -> Value {
        let mut per = Map::new();
        for r in &self.sizes {
            let mut o = r.to_json();
            o["rebuild_vs_read_limit"] = json!(r.rebuild_vs_read_limit());
            per.insert(r.msgs.to_string(), o);
        }
        let mut ratios = Map::new();
        for g in &self.goals {
            ratios.insert(
                g.name.into(),
                json!({"what": g.what, "value": g.value, "op": g.op, "target": g.target,
                       "pass": g.pass()}),
            );
        }
        json!({
            "scale": per,
            "ratios": ratios,
            "goals": goals_json(&self.goals),
            "meta": {"sizes": self.opts.sizes, "payload_bytes": 128, "subjects": 64,
                     "subject_bytes": 16, "gets": self.opts.gets, "calls": self.opts.calls,
                     "elapsed_s": self.elapsed_s,
                     "loadavg_1m": {"start": self.loadavg.0, "end": self.loadavg.1},
                     "notes": self.notes()},
        })
    }

    /// Rows of `(label, values per size, ratios)` as text.
    fn rows(&self) -> Vec<(String, Vec<String>, Vec<String>)> {
        let pairs = self.pairs();
        ROWS.iter()
            .map(|(label, fmt, get)| {
                let vals = self.sizes.iter().map(|r| fmt(get(r))).collect();
                let ratios = pairs
                    .iter()
                    .map(|(a, b)| format!("{:.3}", get(b) / get(a)))
                    .collect();
                (label.to_string(), vals, ratios)
            })
            .collect()
    }

    fn goal_rows(&self) -> Vec<[String; 5]> {
        self.goals
            .iter()
            .map(|g| {
                [
                    g.name.to_string(),
                    g.what.to_string(),
                    g.value.map_or("-".into(), fmt_goal),
                    format!("{} {}", g.op, fmt_goal(g.target)),
                    match g.pass() {
                        Some(true) => "pass",
                        Some(false) => "FAIL",
                        None => "not run",
                    }
                    .to_string(),
                ]
            })
            .collect()
    }

    /// A readable table, the goals and the notes; the last line is the goals line.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "seqstore bench --scale: {} sizes, {:.0} s\n",
            self.sizes.len(),
            self.elapsed_s
        );
        let _ = write!(s, "{:<52}", "");
        for r in &self.sizes {
            let _ = write!(s, " {:>14}", size_label(r.msgs));
        }
        for h in self.ratio_headers() {
            let _ = write!(s, " {h:>14}");
        }
        let _ = writeln!(s);
        for (label, vals, ratios) in self.rows() {
            let _ = write!(s, "{label:<52}");
            for v in vals.iter().chain(&ratios) {
                let _ = write!(s, " {v:>14}");
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
        for [name, what, value, target, result] in self.goal_rows() {
            let _ = writeln!(s, "{name:<34} {value:>10} {target:>8}  {result:<7} {what}");
        }
        let _ = writeln!(s, "\nnotes:");
        for n in self.notes() {
            let _ = writeln!(s, "  - {n}");
        }
        let _ = writeln!(s, "\n{}", self.goals_line());
        s
    }

    /// The run as a Markdown page of its own (docs/BENCHMARKS-SCALE.md): generated, with the
    /// machine, date and commit; `command` regenerates it.
    pub fn markdown(&self, machine: &Machine, command: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# seqstore benchmarks at scale\n");
        let _ = writeln!(
            s,
            "<!-- Generated by seqstore-bench --scale. Do not edit by hand: run `{command}` again. -->\n"
        );
        let _ = writeln!(
            s,
            "This page is generated by `seqstore-bench --scale` and must not be edited by hand; \
             regenerate it with `{command}` (about 20 GB of disk, not run in CI). Every figure \
             below comes from that one run. docs/BENCHMARKS.md is the default run's page.\n"
        );
        machine.header_rows(&mut s);
        let load = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let _ = writeln!(s, "| run | `--scale`, {:.0} s |", self.elapsed_s);
        let _ = writeln!(
            s,
            "| load average (1 min) | {} at the start, {} at the end |\n",
            load(self.loadavg.0),
            load(self.loadavg.1)
        );
        let _ = writeln!(s, "## Goals\n\n`{}`\n", self.goals_line());
        let _ = writeln!(
            s,
            "| goal | measured as | value | target | result |\n|---|---|---:|---:|---|"
        );
        for [name, what, value, target, result] in self.goal_rows() {
            let target = target.replace(">=", "≥").replace("<=", "≤");
            let result = if result == "FAIL" {
                "**miss**".into()
            } else {
                result
            };
            let _ = writeln!(s, "| `{name}` | {what} | {value} | {target} | {result} |");
        }
        let _ = write!(s, "\n## Table\n\n| |");
        for r in &self.sizes {
            let _ = write!(s, " {} |", size_label(r.msgs));
        }
        let heads = self.ratio_headers();
        for h in &heads {
            let _ = write!(s, " {h} |");
        }
        let _ = writeln!(
            s,
            "\n|---|{}",
            "---:|".repeat(self.sizes.len() + heads.len())
        );
        for (label, vals, ratios) in self.rows() {
            let cells: Vec<String> = vals.into_iter().chain(ratios).collect();
            let _ = writeln!(s, "| {label} | {} |", cells.join(" | "));
        }
        let _ = writeln!(s, "\n## Notes\n");
        for n in self.notes() {
            let _ = writeln!(s, "- {n}");
        }
        s
    }
}
