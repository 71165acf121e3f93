//! Tests of `entries.rs`: packed entries read back as full ones, their size, the fallbacks.

use super::*;
use proptest::prelude::*;

/// Entries as a block's scan yields them: increasing sequences (with gaps), increasing
/// offsets, timestamps that do not decrease (with jumps), a few subjects.
fn block() -> impl Strategy<Value = Vec<Entry>> {
    let step = (
        prop_oneof![9 => Just(1u64), 1 => 2u64..1000, 1 => Just(1u64 << 40)],
        0u32..3000,
        prop_oneof![8 => 0i64..5000, 1 => 0i64..(1 << 40)],
        0u32..64,
        any::<bool>(),
        prop_oneof![4 => 0u32..5, 1 => 0u32..100_000],
    );
    (
        1u64..1 << 50,
        -(1i64 << 60)..(1 << 60),
        proptest::collection::vec(step, 0..300),
    )
        .prop_map(|(mut seq, mut ts, steps)| {
            let mut off = 36u32;
            let mut out = Vec::new();
            for (ds, len, dt, gap, deleted, subj) in steps {
                seq = seq.saturating_add(ds);
                ts = ts.saturating_add(dt);
                out.push(Entry {
                    seq,
                    ts,
                    off,
                    len: len + 36,
                    subj,
                    deleted,
                });
                off = off.saturating_add(len + 36 + gap);
            }
            out
        })
}

/// Whether packed entry `p` reads back as full entry `f`, where `run_ts` is the smallest
/// timestamp of `f`'s run if the packing dropped the timestamps.
fn same(f: &Entry, p: &Entry, run_ts: Option<i64>) -> bool {
    (
        f.seq,
        run_ts.unwrap_or(f.ts),
        f.off,
        f.len,
        f.subj,
        f.deleted,
    ) == (p.seq, p.ts, p.off, p.len, p.subj, p.deleted)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Packed entries read back as the full ones, by index, by iteration either way, by
    /// sequence and after deleted marks; and the packed form is never larger.
    #[test]
    fn packed_entries_read_back_as_full(v in block(), marks in proptest::collection::vec(any::<prop::sample::Index>(), 0..20)) {
        let mut full = Entries::from(v.clone());
        let mut packed = Entries::from(v.clone());
        let did = packed.pack();
        prop_assert_eq!(did, matches!(packed, Entries::Packed(_)));
        prop_assert_eq!(did, !v.is_empty() && Packed::build(&v).is_some());
        prop_assert_eq!(packed.len(), v.len());
        for m in &marks {
            if !v.is_empty() {
                let i = m.index(v.len());
                full.set_deleted(i);
                packed.set_deleted(i);
            }
        }
        let exact = packed.ts_exact();
        let run_ts = |i: usize| {
            let r = i / RUN * RUN;
            (!exact).then(|| v[r..(r + RUN).min(v.len())].iter().map(|e| e.ts).min().unwrap())
        };
        for i in 0..v.len() {
            prop_assert!(same(&full.at(i), &packed.at(i), run_ts(i)), "entry {}: {:?} vs {:?}", i, full.at(i), packed.at(i));
            prop_assert_eq!(packed.seq_at(i), v[i].seq);
            prop_assert_eq!(packed.index_of(v[i].seq), Ok(i));
            prop_assert_eq!(packed.index_of(v[i].seq + 1).is_ok(), v.get(i + 1).is_some_and(|n| n.seq == v[i].seq + 1));
        }
        prop_assert!(full.iter().zip(packed.iter()).enumerate().all(|(i, (f, p))| same(&f, &p, run_ts(i))));
        let n = v.len();
        prop_assert!(full.iter().rev().zip(packed.iter().rev()).enumerate().all(|(k, (f, p))| same(&f, &p, run_ts(n - 1 - k))));
        prop_assert_eq!(packed.index_of(0), Err(0));
        if let Some(l) = v.last() {
            prop_assert_eq!(packed.index_of(l.seq + 1), Err(v.len()));
            let mid = v[v.len() / 2].seq;
            prop_assert_eq!(packed.seq_point(mid), v.len() / 2);
        }
        // the time search over the runs' samples agrees with a search over whole entries
        let probes = v.iter().flat_map(|e| [e.ts.saturating_sub(1), e.ts, e.ts.saturating_add(1)]);
        for t in probes.chain([i64::MIN, i64::MAX]) {
            prop_assert_eq!(full.ts_point(t), v.partition_point(|e| e.ts < t), "full, ts {}", t);
            prop_assert_eq!(packed.ts_point(t), packed.partition_point(|e| e.ts < t), "packed, ts {}", t);
        }
        if exact {
            let back: Vec<Entry> = packed.clone_full();
            prop_assert!(back.iter().zip(full.iter()).all(|(a, b)| same(a, &b, None)));
        }
        // a truncate's cut keeps a prefix, packed
        let keep = v.len() / 3;
        packed.keep_first(keep);
        prop_assert_eq!(packed.len(), keep);
        for i in 0..keep {
            prop_assert!(same(&full.at(i), &packed.at(i), run_ts(i)));
        }
        for t in v[..keep].iter().flat_map(|e| [e.ts, e.ts.saturating_add(1)]).chain([i64::MAX]) {
            prop_assert_eq!(packed.ts_point(t), packed.partition_point(|e| e.ts < t), "cut, ts {}", t);
        }
    }
}

/// Non-decreasing samples as runs of a stream give them: a steady rate with jitter, bursts
/// of equal times, long pauses, and the extremes of `i64`.
fn samples() -> impl Strategy<Value = Vec<i64>> {
    let step = prop_oneof![
        8 => 900i64..1100,
        2 => Just(0i64),
        1 => 0i64..(1 << 40),
        1 => Just(i64::MAX / 4),
    ];
    (any::<i64>(), proptest::collection::vec(step, 0..5000)).prop_map(|(start, steps)| {
        let mut t = start;
        let mut v = vec![t];
        for d in steps {
            t = t.saturating_add(d);
            v.push(t);
        }
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The time directory's search agrees with `partition_point` on sorted samples at every
    /// sample's time, just around it, between and beyond; and on samples in any order it
    /// returns an index in range without panicking.
    #[test]
    fn the_time_directory_finds_what_partition_point_finds(v in samples(), noise in proptest::collection::vec(any::<i64>(), 0..300), probes in proptest::collection::vec(any::<i64>(), 0..50)) {
        let dir = TimeDir::new(&v);
        let around = v.iter().step_by(7).flat_map(|&t| [t.saturating_sub(1), t, t.saturating_add(1)]);
        for t in around.chain(probes.iter().copied()).chain([i64::MIN, i64::MAX]) {
            prop_assert_eq!(dir.point(&v, t), v.partition_point(|&x| x < t), "ts {}", t);
        }
        let dir = TimeDir::new(&noise);
        for t in noise.iter().copied().chain(probes) {
            prop_assert!(dir.point(&noise, t) <= noise.len());
        }
    }
}

impl Entries {
    fn clone_full(&mut self) -> Vec<Entry> {
        self.full_mut().clone()
    }
}

/// The dict holds each subject once, and every entry's local id names its subject, for a
/// few subjects and for many (the table grows).
#[test]
fn the_subject_dict_is_distinct_and_maps_every_entry() {
    for n in [1u32, 3, 64, 65, 5000] {
        let v: Vec<Entry> = (0..20_000u32)
            .map(|i| Entry {
                seq: 1 + i as u64,
                ts: 0,
                off: 36 + i * 40,
                len: 40,
                subj: (i.wrapping_mul(2_654_435_761) % n) * 7,
                deleted: false,
            })
            .collect();
        let (dict, locals) = subject_dict(&v);
        let mut want: Vec<u32> = v.iter().map(|e| e.subj).collect();
        want.sort_unstable();
        want.dedup();
        let mut got = dict.clone();
        got.sort_unstable();
        assert_eq!(got, want, "{n} subjects: each once");
        assert_eq!(locals.len(), v.len());
        for (e, &l) in v.iter().zip(&locals) {
            assert_eq!(dict[l as usize], e.subj, "{n} subjects");
        }
    }
}

/// A dense block of small records on three subjects (the shape of the bench's stream)
/// packs to at most 8 bytes a message, counting every side table.
#[test]
fn a_dense_block_packs_to_at_most_8_bytes_a_message() {
    for (dt, name) in [
        (200i64, "5M/s"),
        (1_000_000, "1k/s"),
        (1_000_000_000, "1/s"),
    ] {
        let v: Vec<Entry> = (0..45_000u64)
            .map(|i| Entry {
                seq: 1_000 + i,
                ts: 1_700_000_000_000_000_000 + i as i64 * dt + (i as i64 * 7919) % dt.max(1) / 3,
                off: 36 + i as u32 * 180,
                len: 170 + (i % 3) as u32,
                subj: (i % 3) as u32 + 40,
                deleted: i % 10 == 0,
            })
            .collect();
        let mut e = Entries::from(v);
        assert!(e.pack(), "{name}");
        let per = e.heap_bytes() as f64 / e.len() as f64;
        assert!(per <= 8.0, "{name}: {per:.2} bytes a message");
    }
}

/// Timestamps hours apart inside a run: the field drops them (a lower bound remains).
/// Records 250 MB apart, lengths from 36 B to 64 MiB and 17 subjects in one run need 65
/// bits even without timestamps: the block stays full, and says so.
#[test]
fn wide_blocks_drop_their_timestamps_or_stay_full() {
    let entry = |i: u64, step: u32, len: u32| Entry {
        seq: 1 + i,
        ts: (i as i64) << 45,
        off: 36 + i as u32 * step,
        len: 36 + (i as u32 % 2) * len,
        subj: i as u32 * 1000,
        deleted: false,
    };
    let mut e = Entries::from((0..40).map(|i| entry(i, 200, 100)).collect::<Vec<_>>());
    assert!(e.pack());
    assert!(!e.ts_exact());
    assert_eq!(e.at(17).ts, 16 << 45, "its run's smallest");
    let step = (u32::MAX - (64 << 20)) / 17;
    let mut e = Entries::from(
        (0..17)
            .map(|i| entry(i, step, 64 << 20))
            .collect::<Vec<_>>(),
    );
    assert!(!e.pack());
    assert!(matches!(e, Entries::Full(_)));
}
