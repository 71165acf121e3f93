//! The reads `query_model.rs`'s random sequence asks after each write: `prev_matching` and
//! `last_for_subject` with a filter, the multi-filter reads, `seq_from_time`,
//! `filtered_state`, `subjects_state_detail`, `multi_last_seqs` (and `all_last_seqs`),
//! `subject_for_seq`, `num_pending` and `get_batch`, each with random arguments (bad filters
//! included) and its answer asserted equal to the model's.

use super::{kind, Gen, Model, Out};
use crate::memfs::MemFs;
use crate::*;
use std::collections::BTreeMap;

/// The sequence of a read message, the error's kind.
fn msg_seq(r: Result<Option<StoredMsg>>) -> Out<Option<u64>> {
    kind(r).map(|o| o.map(|x| x.seq))
}

/// `prev_matching` against the model; whether the answer was not trivial.
fn ask_prev(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let (f, from) = (g.filter(), g.seq(m));
    let want = Model::check(&[f]).map(|_| m.sel(&[f], 0, from).last().map(|x| x.0));
    let full = matches!(want, Ok(Some(_)));
    assert_eq!(
        msg_seq(s.prev_matching(f, from)),
        want,
        "{ctx}: prev {f} {from}"
    );
    // `last_for_subject` takes a filter too (NATS's `last_by_subj`): the newest match
    let want = Model::check(&[f]).map(|_| m.sel(&[f], 0, u64::MAX).last().map(|x| x.0));
    assert_eq!(
        msg_seq(s.last_for_subject(f)),
        want,
        "{ctx}: last_for_subject {f}"
    );
    full
}

/// `next_matching_multi` or `prev_matching_multi` against the model; whether the answer was not trivial.
fn ask_multi(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let (fs, from) = (g.filters(), g.seq(m));
    let fwd = g.n(2) == 0;
    let want = Model::check(&fs).map(|_| match fwd {
        true => m.sel(&fs, from, u64::MAX).first().map(|x| x.0),
        false => m.sel(&fs, 0, from).last().map(|x| x.0),
    });
    let got = if fwd {
        s.next_matching_multi(&fs, from)
    } else {
        s.prev_matching_multi(&fs, from)
    };
    if let Ok(Some(msg)) = &got {
        assert_eq!(*msg, m.msg(msg.seq), "{ctx}: message read");
    }
    let full = matches!(want, Ok(Some(_))) && fs.len() > 1;
    assert_eq!(msg_seq(got), want, "{ctx}: multi fwd={fwd} {fs:?} {from}");
    full
}

/// `seq_from_time` against the model; whether the answer was not trivial.
fn ask_time(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, now: i64, ctx: &str) -> bool {
    let first_ts = m.msgs.values().next().map_or(now, |v| v.1);
    let ts = match g.n(10) {
        0 => i64::MIN,
        1 => i64::MAX,
        // around the stored timestamps (the clock starts at 1000, moves 0-2 an append)
        _ => first_ts - 5 + g.n((now - first_ts + 10) as u64) as i64,
    };
    let want = m
        .msgs
        .iter()
        .find(|x| x.1 .1 >= ts)
        .map_or(m.last + 1, |x| *x.0);
    let full = want > m.first() && want <= m.last;
    assert_eq!(
        s.seq_from_time(ts).unwrap(),
        want,
        "{ctx}: seq_from_time {ts}"
    );
    full
}

/// `filtered_state` or `filtered_state_multi` against the model; whether the answer was not trivial.
fn ask_filtered(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let (fs, from) = (g.filters(), g.seq(m));
    let want = Model::check(&fs).map(|_| m.filtered(&fs, from));
    let got = match fs.as_slice() {
        [f] => s.filtered_state(f, from),
        _ => s.filtered_state_multi(&fs, from),
    };
    let full = want.is_ok_and(|w| w.msgs > 1) && from > m.first();
    assert_eq!(kind(got), want, "{ctx}: filtered_state {fs:?} {from}");
    full
}

/// `subjects_state_detail` against the model; whether the answer was not trivial.
fn ask_detail(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let f = g.filter();
    let want = Model::check(&[f]).map(|_| {
        let mut per: BTreeMap<String, FilteredState> = BTreeMap::new();
        for (k, v) in m.sel(&[f], 0, u64::MAX) {
            let e = per.entry(v.0.clone()).or_default();
            e.msgs += 1;
            e.first = if e.first == 0 { k } else { e.first };
            e.last = k;
        }
        per
    });
    let full = want.as_ref().is_ok_and(|w| w.len() > 1);
    assert_eq!(kind(s.subjects_state_detail(f)), want, "{ctx}: detail {f}");
    full
}

/// `multi_last_seqs` against the model; whether the answer was not trivial.
fn ask_multi_last(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let (fs, max_seq, max_count) = (g.filters(), g.seq(m), g.n(5) as usize);
    let want = Model::check(&fs).and_then(|_| {
        let top = if max_seq == 0 { m.last } else { max_seq };
        let mut v: Vec<u64> = m.subject_lasts(&fs, top).into_values().collect();
        v.sort_unstable();
        match max_count > 0 && v.len() > max_count {
            true => Err("too many"),
            false => Ok(v),
        }
    });
    let full = want.as_ref().is_ok_and(|w| w.len() > 1) && max_seq < m.last;
    let got = kind(s.multi_last_seqs(&fs, max_seq, max_count));
    assert_eq!(got, want, "{ctx}: multi_last {fs:?} {max_seq} {max_count}");
    let mut all: Vec<u64> = m.subject_lasts(&[">"], m.last).into_values().collect();
    all.sort_unstable();
    assert_eq!(kind(s.all_last_seqs()), Ok(all), "{ctx}: all_last_seqs");
    full
}

/// `subject_for_seq` against the model; whether the answer was not trivial.
fn ask_subject(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let seq = g.seq(m);
    let want = m.msgs.get(&seq).map(|v| v.0.clone()).ok_or("not found");
    let full = want.is_ok();
    assert_eq!(
        kind(s.subject_for_seq(seq)),
        want,
        "{ctx}: subject_for_seq {seq}"
    );
    full
}

/// `num_pending` or `num_pending_multi` against the model; whether the answer was not trivial.
fn ask_pending(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let (fs, from, lps) = (g.filters(), g.seq(m), g.n(2) == 0);
    let want = Model::check(&fs).map(|_| {
        let n = match lps {
            true => m
                .subject_lasts(&fs, u64::MAX)
                .values()
                .filter(|l| **l >= from)
                .count(),
            false => m.sel(&fs, from, u64::MAX).len(),
        };
        (n as u64, m.last)
    });
    let got = match fs.as_slice() {
        [f] => s.num_pending(from, f, lps),
        _ => s.num_pending_multi(from, &fs, lps),
    };
    let full = want.is_ok_and(|w| w.0 > 1) && from > m.first();
    assert_eq!(kind(got), want, "{ctx}: num_pending {fs:?} {from} {lps}");
    full
}

/// `get_batch` against the model; whether the answer was not trivial.
fn ask_batch(s: &mut Store<MemFs>, m: &Model, g: &mut Gen, ctx: &str) -> bool {
    let (f, from) = (g.filter(), g.seq(m));
    let (max_msgs, max_bytes) = (g.n(12) as usize, [0, 40, 100, 400][g.n(4) as usize]);
    let want = Model::check(&[f]).map(|_| {
        let (mut out, mut bytes) = (Vec::new(), 0);
        for (k, v) in m.sel(&[f], from, u64::MAX).into_iter().take(max_msgs) {
            bytes += m.size(k, v);
            if max_bytes > 0 && !out.is_empty() && bytes > max_bytes {
                break;
            }
            out.push(m.msg(k));
        }
        out
    });
    let full = want.as_ref().is_ok_and(|w| w.len() > 1);
    let got = kind(s.get_batch(from, f, max_msgs, max_bytes));
    // the same batch as records: decoded, the same messages
    let mut recs = Vec::new();
    let n = kind(s.get_batch_records(from, f, max_msgs, max_bytes, &mut recs));
    let mut decoded = Vec::new();
    while let crate::record::Decoded::Record(r) =
        crate::record::decode(&recs[decoded_len(&decoded)..])
    {
        let msg = StoredMsg {
            seq: r.seq,
            ts: r.ts,
            subject: r.subject.into(),
            headers: r.headers.to_vec(),
            payload: r.payload.to_vec(),
        };
        decoded.push((r.len, msg));
        if decoded_len(&decoded) == recs.len() {
            break;
        }
    }
    let via_records: Out<Vec<StoredMsg>> = n.map(|_| decoded.into_iter().map(|d| d.1).collect());
    assert_eq!(via_records, want, "{ctx}: get_batch_records {f} {from}");
    assert_eq!(
        got, want,
        "{ctx}: get_batch {f} {from} {max_msgs} {max_bytes}"
    );
    full
}

/// The bytes the decoded records of `get_batch_records` took.
fn decoded_len(d: &[(usize, StoredMsg)]) -> usize {
    d.iter().map(|x| x.0).sum()
}

/// One random read with random arguments, asserted equal to the model's answer.
/// Returns which read it was and whether its answer was a non-empty success (the test counts
/// them, so that a generator that only ever asks trivial questions fails).
pub(super) fn one_read(
    s: &mut Store<MemFs>,
    m: &Model,
    g: &mut Gen,
    now: i64,
    ctx: &str,
) -> (usize, bool) {
    let which = g.n(10) as usize;
    let full = match which {
        0 | 1 => ask_prev(s, m, g, ctx),
        2 => ask_multi(s, m, g, ctx),
        3 => ask_time(s, m, g, now, ctx),
        4 => ask_filtered(s, m, g, ctx),
        5 => ask_detail(s, m, g, ctx),
        6 => ask_multi_last(s, m, g, ctx),
        7 => ask_subject(s, m, g, ctx),
        8 => ask_pending(s, m, g, ctx),
        _ => ask_batch(s, m, g, ctx),
    };
    (which, full)
}
