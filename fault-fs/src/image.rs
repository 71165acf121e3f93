//! Crash images: which unsynced operations a crash keeps, and the filesystem that results.

use crate::core::{Core, DataKind, DirNode, FileNode, Ino, Node, NsView, ROOT};
use crate::data::Data;
use crate::rng::Rng;
use crate::{CallSite, Model};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// One unsynced operation a crash may keep or drop.
#[derive(Clone, Debug)]
pub(crate) struct Cand {
    /// Trace index of the operation (candidates are sorted by it: issue order).
    pub(crate) op: u64,
    pub(crate) site: CallSite,
    pub(crate) what: CandRef,
    /// For a write: its first interior sector boundary and how many there are.
    pub(crate) tears: Option<(u64, u64)>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum CandRef {
    Ns(usize),
    Data { ino: Ino, idx: usize },
}

/// What a crash does with one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    Drop,
    Keep,
    /// Only the sectors before this boundary reached the disk; the file grew only to it.
    TornHead(u64),
    /// Only the sectors from this boundary on reached the disk; the file grew to the write's
    /// end and the sectors before read as what was there before (zeros past the old end) —
    /// ALICE's "garbage, then data" for appends.
    TornTail(u64),
}

/// Lists the unsynced operations of a state in issue order.
pub(crate) fn candidates(core: &Core, sector: u64) -> Vec<Cand> {
    let mut out = Vec::new();
    for (i, e) in core.ns_log.iter().enumerate() {
        if !e.durable() {
            out.push(Cand {
                op: e.op,
                site: e.site,
                what: CandRef::Ns(i),
                tears: None,
            });
        }
    }
    for (&ino, node) in &core.nodes {
        if let Node::File(f) = &**node {
            for (idx, d) in f.pending.iter().enumerate() {
                let tears = match &d.kind {
                    DataKind::Write { off, bytes, .. } => {
                        let first = (off / sector).saturating_add(1).saturating_mul(sector);
                        let end = off.saturating_add(bytes.len() as u64);
                        (first < end).then(|| (first, (end - 1 - first) / sector + 1))
                    }
                    DataKind::SetLen(_) => None,
                };
                out.push(Cand {
                    op: d.op,
                    site: d.site,
                    what: CandRef::Data { ino, idx },
                    tears,
                });
            }
        }
    }
    out.sort_by_key(|c| c.op);
    out
}

/// A recipe for one crash image at a crash point. Its `Display` goes into violation reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spec {
    /// Nothing unsynced survives.
    Pessimistic,
    /// Every unsynced operation survives.
    AllKept,
    /// The first `k` unsynced operations survive.
    Prefix(usize),
    /// Everything but the `i`-th unsynced operation survives (Posix only).
    Omit(usize),
    /// The first `i` survive and the `i`-th (a write) is torn at `at`.
    TornPrefix { i: usize, at: u64 },
    /// Everything survives but the `i`-th (a write), torn at `at` (Posix only).
    TornAll { i: usize, at: u64 },
    /// A random subset allowed by the model, from this seed.
    Random(u64),
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spec::Pessimistic => write!(f, "all unsynced operations dropped"),
            Spec::AllKept => write!(f, "all unsynced operations kept"),
            Spec::Prefix(k) => write!(f, "first {k} unsynced operations kept"),
            Spec::Omit(i) => write!(f, "all unsynced operations kept but #{i}"),
            Spec::TornPrefix { i, at } => {
                write!(
                    f,
                    "first {i} unsynced operations kept, #{i} torn at byte {at}"
                )
            }
            Spec::TornAll { i, at } => {
                write!(f, "all unsynced operations kept, #{i} torn at byte {at}")
            }
            Spec::Random(s) => write!(f, "random subset, image seed {s:#x}"),
        }
    }
}

/// The bounded, ALICE-style list of images at one crash point, in a fixed order: pessimistic,
/// all kept, then for each unsynced operation from the most recent back: the prefix before it
/// (it and everything after dropped), everything but it (Posix), and it torn at up to
/// `max_tears` sector boundaries after its prefix and (Posix) with everything else kept.
/// Newest first, so that a cap on the number of images still covers the operations nearest to
/// the crash (the likeliest culprits) with every kind of image.
pub(crate) fn enumerate(cands: &[Cand], model: Model, max_tears: usize, sector: u64) -> Vec<Spec> {
    let n = cands.len();
    let mut out = vec![Spec::Pessimistic];
    if n == 0 {
        return out;
    }
    out.push(Spec::AllKept);
    for i in (0..n).rev() {
        if i > 0 {
            out.push(Spec::Prefix(i));
        }
        if model == Model::Posix && n >= 2 {
            out.push(Spec::Omit(i));
        }
        if let Some((first, count)) = cands[i].tears {
            for at in spread(first, count, max_tears, sector) {
                out.push(Spec::TornPrefix { i, at });
                if model == Model::Posix {
                    out.push(Spec::TornAll { i, at });
                }
            }
        }
    }
    out
}

/// Up to `max` of the `count` boundaries `first + k*sector`, evenly spread, always including the
/// first and the last (where torn records are most likely to confuse recovery).
fn spread(first: u64, count: u64, max: usize, sector: u64) -> Vec<u64> {
    let max = max as u64;
    let ks: Vec<u64> = if count <= max {
        (0..count).collect()
    } else if max <= 1 {
        (0..max).collect()
    } else {
        (0..max).map(|t| t * (count - 1) / (max - 1)).collect()
    };
    ks.into_iter().map(|k| first + k * sector).collect()
}

impl Spec {
    /// The keep/drop decision for every candidate.
    pub(crate) fn choices(&self, cands: &[Cand], model: Model, sector: u64) -> Vec<Choice> {
        let n = cands.len();
        let mut ch = vec![Choice::Drop; n];
        match *self {
            Spec::Pessimistic => {}
            Spec::AllKept => ch.fill(Choice::Keep),
            Spec::Prefix(k) => ch[..k.min(n)].fill(Choice::Keep),
            Spec::Omit(i) => {
                ch.fill(Choice::Keep);
                if i < n {
                    ch[i] = Choice::Drop;
                }
            }
            Spec::TornPrefix { i, at } => {
                ch[..i.min(n)].fill(Choice::Keep);
                if i < n {
                    ch[i] = Choice::TornHead(at);
                }
            }
            Spec::TornAll { i, at } => {
                ch.fill(Choice::Keep);
                if i < n {
                    ch[i] = Choice::TornHead(at);
                }
            }
            Spec::Random(seed) => random_choices(&mut ch, cands, model, sector, seed),
        }
        ch
    }
}

fn random_tear(rng: &mut Rng, c: &Cand, sector: u64) -> Option<u64> {
    c.tears
        .map(|(first, count)| first + rng.scaled_below(count) * sector)
}

fn random_choices(ch: &mut [Choice], cands: &[Cand], model: Model, sector: u64, seed: u64) {
    let mut rng = Rng::new(seed);
    match model {
        Model::Posix => {
            // A per-image keep probability (10%..90%) so that both sparse and dense subsets
            // come up, rather than always about half.
            let p = (1 + rng.scaled_below(9)) as f64 / 10.0;
            for (c, slot) in cands.iter().zip(ch.iter_mut()) {
                if !rng.probability(p) {
                    continue;
                }
                *slot = match random_tear(&mut rng, c, sector) {
                    Some(at) if rng.probability(0.25) => {
                        if rng.probability(0.5) {
                            Choice::TornHead(at)
                        } else {
                            Choice::TornTail(at)
                        }
                    }
                    _ => Choice::Keep,
                };
            }
        }
        Model::Ordered => {
            let k = rng.scaled_below(cands.len() as u64 + 1) as usize;
            ch[..k].fill(Choice::Keep);
            if k > 0 {
                if let Some(at) = random_tear(&mut rng, &cands[k - 1], sector) {
                    if rng.probability(0.5) {
                        ch[k - 1] = Choice::TornHead(at);
                    }
                }
            }
        }
    }
}

fn apply_data(data: &mut Data, kind: &DataKind, choice: Choice) {
    let (off, bytes, whole) = match (kind, choice) {
        (_, Choice::Drop) => return,
        (DataKind::SetLen(len), _) => return data.set_len(*len),
        (DataKind::Write { off, bytes, whole }, _) => (*off, bytes, whole),
    };
    let cut = |at: u64| at.saturating_sub(off).min(bytes.len() as u64) as usize;
    // the part of the write the image keeps: its head, its tail, or all of it (a dropped
    // write returned above)
    let part = match choice {
        Choice::TornHead(at) => (0, cut(at)),
        Choice::TornTail(at) => {
            let end = off + bytes.len() as u64;
            if data.len() < end {
                data.set_len(end);
            }
            (cut(at), bytes.len())
        }
        Choice::Keep | Choice::Drop => (0, bytes.len()),
    };
    data.write_part(off, bytes, part, whole);
}

/// The state a crash leaves: the durable base, plus the durable namespace entries, plus the
/// chosen unsynced operations, applied in issue order with the skip rule of [`NsView::apply`].
/// Only what is reachable from the root remains; everything in it is durable.
pub(crate) fn build(core: &Core, cands: &[Cand], choices: &[Choice]) -> Core {
    let mut ns_keep: Vec<bool> = core.ns_log.iter().map(|e| e.durable()).collect();
    let mut data_keep: BTreeMap<Ino, Vec<(usize, Choice)>> = BTreeMap::new();
    for (c, &ch) in cands.iter().zip(choices) {
        if ch == Choice::Drop {
            continue;
        }
        match c.what {
            CandRef::Ns(i) => ns_keep[i] = true,
            CandRef::Data { ino, idx } => data_keep.entry(ino).or_default().push((idx, ch)),
        }
    }
    let mut view = NsView::new(&core.nodes);
    for (e, keep) in core.ns_log.iter().zip(&ns_keep) {
        if *keep {
            view.apply(&e.kind);
        }
    }
    let mut nodes = BTreeMap::new();
    let mut stack = vec![ROOT];
    while let Some(ino) = stack.pop() {
        if nodes.contains_key(&ino) {
            continue; // the tree is acyclic; this only bounds a broken invariant
        }
        let Some(node) = core.nodes.get(&ino) else {
            continue;
        };
        let new = match &**node {
            Node::Dir(_) => {
                let Some(e) = view.entries(ino).cloned() else {
                    continue;
                };
                stack.extend(e.values().copied());
                Node::Dir(DirNode {
                    live: e.clone(),
                    durable: e,
                })
            }
            Node::File(f) => {
                let mut data = f.durable.clone();
                if let Some(ops) = data_keep.get(&ino) {
                    for &(idx, ch) in ops {
                        if let Some(d) = f.pending.get(idx) {
                            apply_data(&mut data, &d.kind, ch);
                        }
                    }
                }
                Node::File(FileNode {
                    live: data.clone(),
                    durable: data,
                    pending: Vec::new(),
                    diverged: false,
                })
            }
        };
        nodes.insert(ino, Arc::new(new));
    }
    Core {
        nodes,
        next_ino: core.next_ino,
        ns_log: Vec::new(),
    }
}
