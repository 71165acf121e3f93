//! What a command prints: one typed value, as JSON lines (serde_json) or as the CLI's text.

use seqstore_core::{
    ConsumerConfig, ConsumerState, RecoveryReport, SequencePair, StoredMsg, StreamState,
    VerifyReport,
};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

use crate::{EXIT_FAILED, EXIT_OK};

/// Header or payload bytes: a JSON string when they are UTF-8, else `{"hex":"…"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Bytes {
    Text(String),
    Hex { hex: String },
}

impl From<&[u8]> for Bytes {
    fn from(b: &[u8]) -> Self {
        match std::str::from_utf8(b) {
            Ok(s) => Bytes::Text(s.to_string()),
            Err(_) => Bytes::Hex {
                hex: b.iter().map(|x| format!("{x:02x}")).collect(),
            },
        }
    }
}

/// A message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Msg {
    pub seq: u64,
    pub ts: i64,
    pub subject: String,
    pub headers: Bytes,
    pub payload: Bytes,
    /// The payload for the text output (lossy UTF-8).
    #[serde(skip)]
    pub text: String,
}

impl From<&StoredMsg> for Msg {
    fn from(m: &StoredMsg) -> Self {
        Msg {
            seq: m.seq,
            ts: m.ts,
            subject: m.subject.clone(),
            headers: m.headers.as_slice().into(),
            payload: m.payload.as_slice().into(),
            text: String::from_utf8_lossy(&m.payload).into_owned(),
        }
    }
}

/// Message counts per subject, a JSON object in subject order (`subjects`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subjects(pub BTreeMap<String, u64>);

impl Serialize for Subjects {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// What recovery found at open (`report`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub used_index: bool,
    pub index_rejected: Option<String>,
    pub purge_completed: bool,
    pub purge_rolled_back: bool,
    /// How many blocks were cut at a bad record.
    pub cuts: usize,
    /// How many damaged records were skipped.
    pub skipped: usize,
    /// How many ranges of sequences were lost.
    pub lost: usize,
    pub lost_data: bool,
}

impl From<&RecoveryReport> for Report {
    fn from(r: &RecoveryReport) -> Self {
        Report {
            used_index: r.used_index,
            index_rejected: r.index_rejected.clone(),
            purge_completed: r.purge_completed,
            purge_rolled_back: r.purge_rolled_back,
            cuts: r.cuts.len(),
            skipped: r.skipped.len(),
            lost: r.lost.len(),
            lost_data: r.lost_data(),
        }
    }
}

/// A damaged place `verify` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProblemOut {
    pub file: String,
    pub offset: u64,
    pub what: String,
}

/// Sequences `verify` found lost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LostOut {
    pub first: u64,
    pub last: u64,
}

/// `verify`'s findings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyOut {
    pub ok: bool,
    pub blocks: u64,
    pub records: u64,
    pub messages: u64,
    pub last_seq: u64,
    pub problems: Vec<ProblemOut>,
    pub lost: Vec<LostOut>,
    pub interrupted_purge: Option<String>,
    /// index.db's status, as store-core names it.
    pub index: String,
    pub stray: Vec<String>,
    /// Durable consumers the consumer files hold.
    pub consumers: u64,
}

impl From<&VerifyReport> for VerifyOut {
    fn from(r: &VerifyReport) -> Self {
        VerifyOut {
            ok: r.is_clean(),
            blocks: r.blocks as u64,
            records: r.records,
            messages: r.messages,
            last_seq: r.last_seq,
            problems: r
                .problems
                .iter()
                .map(|p| ProblemOut {
                    file: p.file.clone(),
                    offset: p.offset,
                    what: p.what.clone(),
                })
                .collect(),
            lost: r
                .lost
                .iter()
                .map(|l| LostOut {
                    first: l.first,
                    last: l.last,
                })
                .collect(),
            interrupted_purge: r.interrupted_purge.clone(),
            index: format!("{:?}", r.index),
            stray: r.stray.clone(),
            consumers: r.consumers as u64,
        }
    }
}

/// A pending delivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingOut {
    pub stream_seq: u64,
    pub consumer_seq: u64,
    pub ts: i64,
}

/// A redelivered message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RedeliveredOut {
    pub stream_seq: u64,
    pub count: u64,
}

/// A consumer's configuration and state (`consumer info`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConsumerInfo {
    pub name: String,
    pub ack_policy: String,
    pub max_deliver: u64,
    pub delivered: SequencePair,
    pub ack_floor: SequencePair,
    pub num_pending: usize,
    pub pending: Vec<PendingOut>,
    pub redelivered: Vec<RedeliveredOut>,
}

impl ConsumerInfo {
    /// The configuration and state of one consumer.
    pub fn new(cfg: &ConsumerConfig, st: &ConsumerState) -> Self {
        ConsumerInfo {
            name: cfg.name.clone(),
            ack_policy: cfg.ack_policy.name().to_string(),
            max_deliver: cfg.max_deliver,
            delivered: st.delivered,
            ack_floor: st.ack_floor,
            num_pending: st.pending.len(),
            pending: st
                .pending
                .iter()
                .map(|(s, p)| PendingOut {
                    stream_seq: *s,
                    consumer_seq: p.sequence,
                    ts: p.timestamp,
                })
                .collect(),
            redelivered: st
                .redelivered
                .iter()
                .map(|(s, n)| RedeliveredOut {
                    stream_seq: *s,
                    count: *n,
                })
                .collect(),
        }
    }
}

/// What a command printed: every command's result, one variant a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Output {
    /// `{"seq":N}`: `append`'s new sequence, `time-seq`'s answer.
    Seq(u64),
    /// `{"last_seq":N}`: `skip`'s new last sequence.
    LastSeq(u64),
    /// One message (`get`, `last`, `next`, `prev`).
    Msg(Msg),
    /// One line each (`dump`).
    Msgs(Vec<Msg>),
    /// `consumer next`'s deliveries, one line each; none is a failure.
    Delivered {
        name: String,
        msgs: Vec<Msg>,
    },
    /// `{"pending":N,"valid_through":S}`.
    Pending {
        pending: u64,
        valid_through: u64,
    },
    Subjects(Subjects),
    /// The stream's counters, with store-core's field names.
    State(StreamState),
    /// `{"deleted":SEQ}`.
    Deleted(u64),
    /// `{"erased":SEQ}`.
    Erased(u64),
    /// `{"purged":N}` (the text also names the first and last sequence after it).
    Purged {
        purged: u64,
        first: u64,
        last: u64,
    },
    /// `{"removed":N}` (`compact`, `truncate`).
    Removed(u64),
    /// `{"synced":true}`.
    Synced,
    /// `{"checkpoint":true}`.
    Checkpoint,
    Report(Report),
    /// `verify`'s findings; damage is a failure.
    Verify(VerifyOut),
    /// `{"added":NAME}`: `consumer add`.
    ConsumerAdded(String),
    /// `{"acked":SEQ}`: `consumer ack`.
    Acked(u64),
    /// `{"removed_consumer":NAME}`: `consumer rm`.
    ConsumerRemoved(String),
    ConsumerInfo(ConsumerInfo),
    /// `{"consumers":[…]}`.
    Consumers(Vec<String>),
}

/// `{"key":value}` as one JSON line.
fn one<T: Serialize + ?Sized>(key: &str, v: &T) -> String {
    let mut m = serde_json::Map::new();
    m.insert(
        key.to_string(),
        serde_json::to_value(v).expect("plain data"),
    );
    serde_json::Value::Object(m).to_string()
}

fn line<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data serializes")
}

impl Output {
    /// The JSON lines (`seqstore --json`, and `seqstore-guest` always).
    pub fn json_lines(&self) -> Vec<String> {
        match self {
            Output::Seq(n) => vec![one("seq", n)],
            Output::LastSeq(n) => vec![one("last_seq", n)],
            Output::Msg(m) => vec![line(m)],
            Output::Msgs(ms) | Output::Delivered { msgs: ms, .. } => ms.iter().map(line).collect(),
            Output::Pending {
                pending,
                valid_through,
            } => {
                #[derive(Serialize)]
                struct P {
                    pending: u64,
                    valid_through: u64,
                }
                vec![line(&P {
                    pending: *pending,
                    valid_through: *valid_through,
                })]
            }
            Output::Subjects(s) => vec![line(s)],
            Output::State(s) => vec![line(s)],
            Output::Deleted(n) => vec![one("deleted", n)],
            Output::Erased(n) => vec![one("erased", n)],
            Output::Purged { purged, .. } => vec![one("purged", purged)],
            Output::Removed(n) => vec![one("removed", n)],
            Output::Synced => vec![one("synced", &true)],
            Output::Checkpoint => vec![one("checkpoint", &true)],
            Output::Report(r) => vec![line(r)],
            Output::Verify(v) => vec![line(v)],
            Output::ConsumerAdded(n) => vec![one("added", n)],
            Output::Acked(n) => vec![one("acked", n)],
            Output::ConsumerRemoved(n) => vec![one("removed_consumer", n)],
            Output::ConsumerInfo(i) => vec![line(i)],
            Output::Consumers(c) => vec![one("consumers", c)],
        }
    }

    /// The text lines (`seqstore` without `--json`); commands that only change the store
    /// print none.
    pub fn text_lines(&self) -> Vec<String> {
        let msg = |m: &Msg| format!("{}\t{}\t{}\t{}", m.seq, m.ts, m.subject, m.text);
        match self {
            Output::Seq(n) | Output::LastSeq(n) => vec![n.to_string()],
            Output::Msg(m) => vec![msg(m)],
            Output::Msgs(ms) => ms.iter().map(msg).collect(),
            Output::Delivered { msgs, .. } => msgs
                .iter()
                .map(|m| format!("{}\t{}\t{}", m.seq, m.subject, m.text))
                .collect(),
            Output::Pending {
                pending,
                valid_through,
            } => vec![
                format!("pending        {pending}"),
                format!("valid through  {valid_through}"),
            ],
            Output::Subjects(s) => s.0.iter().map(|(k, n)| format!("{k}\t{n}")).collect(),
            Output::State(s) => vec![
                format!("messages   {}", s.msgs),
                format!("bytes      {}", s.bytes),
                format!("first seq  {}", s.first_seq),
                format!("last seq   {}", s.last_seq),
                format!("deleted    {}", s.num_deleted),
                format!("subjects   {}", s.num_subjects),
            ],
            Output::Purged {
                purged,
                first,
                last,
            } => vec![format!(
                "purged {purged} messages; first {first} last {last}"
            )],
            Output::Removed(n) => vec![format!("removed {n} messages")],
            Output::Report(r) => vec![format!("{r:?}")],
            Output::Verify(v) => verify_text(v),
            Output::ConsumerInfo(i) => vec![
                format!("name        {}", i.name),
                format!("ack policy  {}", i.ack_policy),
                format!(
                    "delivered   consumer {} stream {}",
                    i.delivered.consumer, i.delivered.stream
                ),
                format!(
                    "ack floor   consumer {} stream {}",
                    i.ack_floor.consumer, i.ack_floor.stream
                ),
                format!("pending     {}", i.num_pending),
                format!("redelivered {}", i.redelivered.len()),
            ],
            Output::Consumers(c) => c.clone(),
            Output::Deleted(_)
            | Output::Erased(_)
            | Output::Synced
            | Output::Checkpoint
            | Output::ConsumerAdded(_)
            | Output::Acked(_)
            | Output::ConsumerRemoved(_) => Vec::new(),
        }
    }

    /// Prints the output on stdout (`json`: [`Output::json_lines`], else
    /// [`Output::text_lines`]) and its [`Output::failure_note`] on stderr after `prog: `;
    /// returns [`Output::exit_code`].
    pub fn print(&self, json: bool, prog: &str) -> u8 {
        let lines = if json {
            self.json_lines()
        } else {
            self.text_lines()
        };
        for l in lines {
            println!("{l}");
        }
        if let Some(note) = self.failure_note() {
            eprintln!("{prog}: {note}");
        }
        self.exit_code()
    }

    /// The exit code: [`EXIT_OK`], or [`EXIT_FAILED`] when `verify` found damage or
    /// `consumer next` had nothing to deliver (both still print what they found).
    pub fn exit_code(&self) -> u8 {
        match self {
            Output::Verify(v) if !v.ok => EXIT_FAILED,
            Output::Delivered { msgs, .. } if msgs.is_empty() => EXIT_FAILED,
            _ => EXIT_OK,
        }
    }

    /// What to say on standard error along with a failing [`Output::exit_code`].
    pub fn failure_note(&self) -> Option<String> {
        match self {
            Output::Delivered { name, msgs } if msgs.is_empty() => {
                Some(format!("no message to deliver to {name}"))
            }
            _ => None,
        }
    }
}

fn verify_text(r: &VerifyOut) -> Vec<String> {
    let mut v = vec![
        format!(
            "{} blocks, {} records ({} messages), last sequence {}",
            r.blocks, r.records, r.messages, r.last_seq
        ),
        format!("index.db: {}", r.index),
    ];
    if r.consumers > 0 {
        v.push(format!("consumers: {}", r.consumers));
    }
    if let Some(p) = &r.interrupted_purge {
        v.push(format!(
            "interrupted purge: {p} (the next open completes or rolls it back)"
        ));
    }
    v.extend(
        r.stray
            .iter()
            .map(|s| format!("stray: {s} (ignored by the store)")),
    );
    v.extend(
        r.problems
            .iter()
            .map(|p| format!("DAMAGE {} at offset {}: {}", p.file, p.offset, p.what)),
    );
    v.extend(
        r.lost
            .iter()
            .map(|l| format!("LOST sequences {}..={}", l.first, l.last)),
    );
    v.push(if r.ok { "ok" } else { "damaged" }.to_string());
    v
}
