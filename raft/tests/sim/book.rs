//! What the clients were told, and the checks against it: every acknowledged append is at its
//! (stream, seq) with its payload on every replica that applied that far, unless a removal that
//! may have come after it was issued; no sequence is given to two payloads; a purge
//! acknowledged never goes back; replicas that applied the same index hold the same streams
//! (consumers included). Consumers (the simulation never deletes one, nor truncates a stream,
//! and never reuses a stream name): an acknowledged add is there, an acknowledged ack is
//! reflected (the sequence is at or below the ack floor or delivered and not pending), an
//! acknowledged delivery is at or below the delivered sequence, and a consumer's ack floor
//! never goes back on any node (checked after every recovery).

use seqstore_raft::streams::StreamDump;
use std::collections::BTreeMap;

/// A removal a client issued (acknowledged or not: an unanswered one may still commit).
#[derive(Debug)]
pub struct Removal {
    pub stream: String,
    /// `Some(seq)`: one message; `None`: the whole stream's messages (purge, stream deletion).
    pub seq: Option<u64>,
    /// Its log index once acknowledged.
    pub index: Option<u64>,
}

/// An acknowledged purge: every message up to `floor` (the highest sequence acknowledged on
/// that stream before the purge was issued) is gone once `index` is applied.
#[derive(Debug)]
pub struct Purged {
    pub stream: String,
    pub floor: u64,
    pub index: u64,
}

/// An acknowledged consumer request, at log index `index`.
#[derive(Debug)]
pub struct ConsumerAcked {
    pub stream: String,
    pub name: String,
    pub index: u64,
    pub what: ConsumerOp,
}

#[derive(Debug)]
pub enum ConsumerOp {
    Added,
    /// A pull that delivered up to this stream sequence.
    Delivered(u64),
    /// An ack of this stream sequence.
    Acked(u64),
}

#[derive(Default)]
pub struct Book {
    pub next_op: u64,
    pub next_stream: u64,
    /// Streams created and not deleted (as issued).
    pub streams: Vec<String>,
    /// (stream, seq) -> (payload, log index).
    pub acked: BTreeMap<(String, u64), (Vec<u8>, u64)>,
    pub removals: Vec<Removal>,
    pub purged: Vec<Purged>,
    /// The first sequence each node showed for each stream at the last check.
    pub first_seen: BTreeMap<(u64, String), u64>,
    /// Consumers added (as issued): (stream, name).
    pub consumers: Vec<(String, String)>,
    /// Consumer requests acknowledged: what the checks hold the replicas to.
    pub consumer_acked: Vec<ConsumerAcked>,
    /// Delivered (acknowledged pulls) and not yet acked, per consumer: what acks name.
    pub unacked: BTreeMap<(String, String), Vec<u64>>,
    /// The ack floor (consumer, stream sequence) each node showed for each consumer at the
    /// last check.
    pub floor_seen: BTreeMap<(u64, String, String), (u64, u64)>,
    pub violations: Vec<String>,
}

impl Book {
    pub fn max_acked(&self, stream: &str) -> u64 {
        self.acked
            .range((stream.to_string(), 0)..=(stream.to_string(), u64::MAX))
            .map(|((_, s), _)| *s)
            .max()
            .unwrap_or(0)
    }

    /// An append acknowledged at `seq`, log index `index`.
    pub fn ack_append(&mut self, stream: &str, seq: u64, payload: Vec<u8>, index: u64) {
        let key = (stream.to_string(), seq);
        if let Some((p, i)) = self.acked.get(&key) {
            if *p != payload {
                self.violations.push(format!(
                    "sequence {stream}/{seq} handed out twice: {:?} at index {i}, {:?} at index {index}",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(&payload)
                ));
            }
            return;
        }
        self.acked.insert(key, (payload, index));
    }

    /// Whether an acknowledged append at `index` may have been removed by an issued removal.
    fn removed(&self, stream: &str, seq: u64, index: u64) -> bool {
        self.removals.iter().any(|r| {
            r.stream == stream
                && r.seq.is_none_or(|s| s == seq)
                && r.index.is_none_or(|i| i > index)
        })
    }

    /// Checks one replica that applied up to `applied` and holds `dump`.
    pub fn check_node(&mut self, node: u64, applied: u64, dump: &BTreeMap<String, StreamDump>) {
        let mut found = Vec::new();
        for ((stream, seq), (payload, index)) in &self.acked {
            if *index > applied {
                continue;
            }
            let msg = dump
                .get(stream)
                .and_then(|d| d.msgs.iter().find(|m| m.seq == *seq));
            match msg {
                Some(m) if m.payload != *payload => found.push(format!(
                    "node {node}: {stream}/{seq} holds {:?}, acknowledged {:?} (index {index})",
                    String::from_utf8_lossy(&m.payload),
                    String::from_utf8_lossy(payload)
                )),
                Some(_) => {}
                None if self.removed(stream, *seq, *index) => {}
                None => found.push(format!(
                    "node {node}: acknowledged append {stream}/{seq} (index {index}) missing, applied {applied}"
                )),
            }
        }
        self.check_purges(node, applied, dump, &mut found);
        self.check_consumers(node, applied, dump, &mut found);
        self.violations.extend(found);
    }

    /// The consumer rules (module doc) on one replica.
    fn check_consumers(
        &mut self,
        node: u64,
        applied: u64,
        dump: &BTreeMap<String, StreamDump>,
        found: &mut Vec<String>,
    ) {
        for a in self.consumer_acked.iter().filter(|a| a.index <= applied) {
            let Some(d) = dump.get(&a.stream) else {
                continue; // the stream was deleted
            };
            let at = format!("node {node}: consumer {}/{}", a.stream, a.name);
            let Some(c) = d.consumers.get(&a.name) else {
                found.push(format!(
                    "{at} missing, its {:?} acknowledged at index {}, applied {applied}",
                    a.what, a.index
                ));
                continue;
            };
            match a.what {
                ConsumerOp::Added => {}
                ConsumerOp::Delivered(q) if c.delivered.stream < q => found.push(format!(
                    "{at}: delivered {:?}, below the delivery of {q} acknowledged at index {}",
                    c.delivered, a.index
                )),
                ConsumerOp::Acked(q) if !c.is_acked(q) => found.push(format!(
                    "{at}: the ack of {q} acknowledged at index {} is not reflected: floor {:?}, delivered {:?}, pending {:?}",
                    a.index, c.ack_floor, c.delivered, c.pending
                )),
                _ => {}
            }
        }
        for (stream, d) in dump {
            for (name, c) in &d.consumers {
                let now = (c.ack_floor.consumer, c.ack_floor.stream);
                let key = (node, stream.clone(), name.clone());
                if let Some(prev) = self.floor_seen.insert(key, now) {
                    if now.0 < prev.0 || now.1 < prev.1 {
                        found.push(format!(
                            "node {node}: consumer {stream}/{name}'s ack floor went back from {prev:?} to {now:?}"
                        ));
                    }
                }
            }
        }
        // a consumer seen before on a stream still there, gone: its floor went back to nothing
        let gone: Vec<(String, String)> = (self.floor_seen.keys())
            .filter(|(n, s, c)| {
                *n == node && dump.get(s).is_some_and(|d| !d.consumers.contains_key(c))
            })
            .map(|(_, s, c)| (s.clone(), c.clone()))
            .collect();
        for (s, c) in gone {
            let prev = self.floor_seen.remove(&(node, s.clone(), c.clone()));
            found.push(format!(
                "node {node}: consumer {s}/{c}'s ack floor went back from {prev:?} to nothing (the consumer is gone)"
            ));
        }
    }

    fn check_purges(
        &mut self,
        node: u64,
        applied: u64,
        dump: &BTreeMap<String, StreamDump>,
        found: &mut Vec<String>,
    ) {
        for p in &self.purged {
            let Some(d) = dump.get(&p.stream) else {
                continue;
            };
            if p.index <= applied && d.msgs.iter().any(|m| m.seq <= p.floor) {
                found.push(format!(
                    "node {node}: {} holds a message at or below {} after the purge at index {}",
                    p.stream, p.floor, p.index
                ));
            }
        }
        for (name, d) in dump {
            let first = d.counters.0;
            let key = (node, name.clone());
            if let Some(prev) = self.first_seen.get(&key) {
                if first < *prev {
                    found.push(format!(
                        "node {node}: {name}'s first sequence went back from {prev} to {first}"
                    ));
                }
            }
            self.first_seen.insert(key, first);
        }
    }

    /// Every acknowledged append must be in a cluster whose replicas all applied `applied`.
    pub fn check_all_applied(&mut self, applied: u64) {
        let lost: Vec<String> = self
            .acked
            .iter()
            .filter(|(_, (_, i))| *i > applied)
            .map(|((s, q), (_, i))| format!("acknowledged append {s}/{q} at index {i} beyond the cluster's applied {applied}"))
            .collect();
        self.violations.extend(lost);
    }
}

/// The first difference between two replicas' streams, if any.
pub fn diff(a: &BTreeMap<String, StreamDump>, b: &BTreeMap<String, StreamDump>) -> Option<String> {
    let names_a: Vec<_> = a.keys().collect();
    let names_b: Vec<_> = b.keys().collect();
    if names_a != names_b {
        return Some(format!("streams {names_a:?} vs {names_b:?}"));
    }
    for (name, da) in a {
        let db = &b[name];
        if da.counters != db.counters {
            return Some(format!(
                "{name}: counters {:?} vs {:?}",
                da.counters, db.counters
            ));
        }
        if da.consumers != db.consumers {
            return Some(format!(
                "{name}: consumers {:?} vs {:?}",
                da.consumers, db.consumers
            ));
        }
        if let Some((x, y)) = da.msgs.iter().zip(&db.msgs).find(|(x, y)| x != y) {
            return Some(format!("{name}: {x:?} vs {y:?}"));
        }
        if da.msgs.len() != db.msgs.len() {
            return Some(format!(
                "{name}: {} vs {} messages",
                da.msgs.len(),
                db.msgs.len()
            ));
        }
    }
    None
}
