//! The ttl, replica and skip writes in `query_model.rs`'s random sequence: ttl appends, replica appends
//! (with wrong sequences and timestamps now and then: refused, nothing changes), skips (also
//! with a wrong first sequence), the clock moving past deadlines, and ticks that remove what
//! expired. Each is applied to the store and the model alike.

use super::{Gen, Model, SUBJECTS};
use crate::memfs::MemFs;
use crate::*;
use std::time::Duration;

/// One of the writes above, drawn.
pub(super) fn one_write15(
    s: &mut Store<MemFs>,
    m: &mut Model,
    g: &mut Gen,
    clock: &ManualClock,
    ctx: &str,
) {
    match g.n(10) {
        0..=3 => ttl_append(s, m, g, clock, ctx),
        4 | 5 => raw_append(s, m, g, clock, ctx),
        6 => skip(s, m, g, ctx),
        7 | 8 => clock.advance(g.n(40) as i64),
        _ => {
            s.tick().unwrap();
            m.expire(clock.now_ns());
        }
    }
}

/// `append_with_ttl`: deadlines from the next nanosecond to ~50 ns on (the clock moves 0-2 a
/// plain append and up to 40 a jump), so that many run out while the test reads.
fn ttl_append(s: &mut Store<MemFs>, m: &mut Model, g: &mut Gen, clock: &ManualClock, ctx: &str) {
    clock.advance(g.n(3) as i64 * g.1);
    let subject = SUBJECTS[g.n(SUBJECTS.len() as u64) as usize];
    let payload = vec![b't'; g.n(60) as usize];
    let ttl = 1 + g.n(50);
    let seq = s
        .append_with_ttl(subject, b"", &payload, Duration::from_nanos(ttl))
        .unwrap();
    m.last += 1;
    assert_eq!(seq, m.last, "{ctx}: append_with_ttl");
    let ts = clock.now_ns();
    m.msgs.insert(seq, (subject.into(), ts, payload));
    m.ttl.insert(seq, ts + ttl as i64);
}

/// `append_raw` at the next sequence and the clock's time; one in six at a wrong sequence
/// (`SequenceMismatch`), one in eight below the last timestamp (`InvalidArgument`).
fn raw_append(s: &mut Store<MemFs>, m: &mut Model, g: &mut Gen, clock: &ManualClock, ctx: &str) {
    clock.advance(g.n(3) as i64 * g.1);
    let subject = SUBJECTS[g.n(SUBJECTS.len() as u64) as usize];
    let payload = vec![b'r'; g.n(60) as usize];
    let last_ts = s.state().last_ts;
    match (g.n(6), g.n(8)) {
        (0, _) => {
            let seq = [m.last, m.last + 2, 0][g.n(3) as usize];
            let r = s.append_raw(seq, clock.now_ns(), subject, b"", &payload);
            assert!(
                matches!(r, Err(Error::SequenceMismatch { .. })),
                "{ctx}: append_raw {seq} at last {}: {r:?}",
                m.last
            );
        }
        (_, 0) if last_ts > 0 => {
            let r = s.append_raw(m.last + 1, last_ts - 1, subject, b"", &payload);
            assert!(matches!(r, Err(Error::InvalidArgument(_))), "{ctx}: {r:?}");
        }
        _ => {
            let ts = clock.now_ns();
            let seq = s
                .append_raw(m.last + 1, ts, subject, b"", &payload)
                .unwrap();
            m.last += 1;
            assert_eq!(seq, m.last, "{ctx}: append_raw");
            m.ttl.remove(&seq);
            m.msgs.insert(seq, (subject.into(), ts, payload));
        }
    }
}

/// `skip_msg` or `skip_many` of 1-3 sequences; one in six from a wrong first sequence.
fn skip(s: &mut Store<MemFs>, m: &mut Model, g: &mut Gen, ctx: &str) {
    if g.n(6) == 0 {
        let r = s.skip_many(m.last + 2, 1);
        assert!(
            matches!(r, Err(Error::SequenceMismatch { .. })),
            "{ctx}: {r:?}"
        );
        return;
    }
    let count = 1 + g.n(3);
    let last = match count {
        1 => s.skip_msg(m.last + 1),
        _ => s.skip_many(m.last + 1, count),
    }
    .unwrap();
    m.last += count;
    assert_eq!(last, m.last, "{ctx}: skip {count}");
}
