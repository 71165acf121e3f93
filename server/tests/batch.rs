//! Appends in batches on a one-node server (a real process): many tasks appending at once
//! through one shared `seqstore-client`, whose concurrent appends travel as batch requests,
//! and `POST /streams/{name}/batch` itself over raw HTTP. Each append must get its own
//! answer: the stream ends holding exactly the appends answered with a sequence, each at its
//! sequence, and exactly the invalid ones refused.

mod common;
use common::*;
use seqstore_client::wire::{kind, AppendRequest, StreamConfig};
use seqstore_client::{Client, Error};
use std::collections::BTreeMap;
use std::time::Duration;

const UP: Duration = Duration::from_secs(15);
const MAX_PAYLOAD: usize = 48;

fn one_node(p: &mut Procs) -> (String, String) {
    let addr = free_addr();
    p.spawn(1, &["--listen".to_string(), addr.clone()]);
    wait_up(&addr, UP);
    let url = format!("http://{addr}");
    (addr, url)
}

/// One generated append: its subject, payload, and whether the stream must refuse it.
#[derive(Clone, Debug)]
struct Gen {
    subject: String,
    payload: Vec<u8>,
    refused: bool,
}

/// A valid message mostly; one in eight has a payload over the stream's `max_payload`,
/// one in sixteen an invalid subject. Payloads are text or bytes (sent as base64).
fn generate(rng: &mut Rng, task: u64, i: u64) -> Gen {
    let (too_big, bad_subject) = (rng.below(8) == 0, rng.below(16) == 0);
    let len = if too_big {
        MAX_PAYLOAD + 1 + rng.below(64) as usize
    } else {
        rng.below(MAX_PAYLOAD as u64 + 1) as usize
    };
    let binary = rng.below(2) == 0;
    let payload = (0..len)
        .map(|k| match binary {
            true => (rng.next() >> 56) as u8,
            false => b"ab\"\\ xyz"[(k + i as usize) % 8],
        })
        .collect();
    let subject = match bad_subject {
        true => format!("t{task}..{i}"),
        false => format!("t{task}.m{}", rng.below(4)),
    };
    Gen {
        subject,
        payload,
        refused: too_big || bad_subject,
    }
}

/// Seeded: 8–64 tasks, each appending 5–40 generated messages one after another through
/// one shared client; then every answer is checked against the stream.
#[test]
fn concurrent_appends_through_one_client_each_get_their_own_answer() {
    let seed = seed("concurrent_appends_through_one_client_each_get_their_own_answer");
    let mut p = Procs::new();
    let (_, url) = one_node(&mut p);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let c = Client::new(&[url.as_str()], None);
    let mut rng = Rng::new(seed);
    let tasks = 8 + rng.below(57);
    let plans: Vec<Vec<Gen>> = (0..tasks)
        .map(|t| {
            (0..5 + rng.below(36))
                .map(|i| generate(&mut rng, t, i))
                .collect()
        })
        .collect();
    let answers = rt.block_on(async {
        until_leader(&c, &url).await;
        let cfg = StreamConfig {
            max_payload: MAX_PAYLOAD as u32,
            ..StreamConfig::default()
        };
        c.create_stream("s", &cfg).await.expect("create");
        let handles: Vec<_> = (plans.iter().cloned())
            .map(|plan| {
                let c = c.clone();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for g in plan {
                        let req = AppendRequest::new(g.subject.clone(), &g.payload);
                        out.push(c.append("s", &req).await);
                    }
                    out
                })
            })
            .collect();
        let mut answers = Vec::new();
        for h in handles {
            answers.push(h.await.expect("task"));
        }
        answers
    });
    let mut stored: BTreeMap<u64, &Gen> = BTreeMap::new();
    for (t, (plan, got)) in plans.iter().zip(&answers).enumerate() {
        let mut last = 0;
        for (i, (g, a)) in plan.iter().zip(got).enumerate() {
            match a {
                Ok(seq) => {
                    assert!(
                        !g.refused,
                        "task {t} append {i} ({g:?}) was stored at {seq}"
                    );
                    assert!(*seq > last, "task {t}: {seq} after {last}");
                    last = *seq;
                    assert!(stored.insert(*seq, g).is_none(), "seq {seq} answered twice");
                }
                Err(Error::Api { kind: k, .. }) if k == kind::REFUSED || k == kind::BAD_REQUEST => {
                    assert!(g.refused, "task {t} append {i} ({g:?}) refused: {a:?}");
                }
                Err(e) => panic!("task {t} append {i}: {e} (seed {seed})"),
            }
        }
    }
    rt.block_on(async {
        let info = c.stream_info("s").await.expect("info");
        assert_eq!(info.state.msgs, stored.len() as u64, "seed {seed}");
        assert_eq!(
            info.state.last_seq,
            stored.len() as u64,
            "no sequence was used twice or skipped"
        );
        for (seq, g) in &stored {
            let m = c.get("s", *seq).await.expect("get").expect("stored");
            assert_eq!(m.subject, g.subject, "seq {seq}, seed {seed}");
            assert_eq!(
                m.payload_bytes().expect("payload"),
                g.payload,
                "seq {seq}, seed {seed}"
            );
        }
    });
}

/// The batch endpoint over raw HTTP: each message its own result in order (a refused one
/// uses no sequence); a malformed message, an empty batch or an oversized body fails the
/// whole request and stores nothing.
#[test]
fn a_batch_request_answers_each_message_and_a_bad_one_stores_nothing() {
    let mut p = Procs::new();
    let (addr, url) = one_node(&mut p);
    let c = Client::new(&[url.as_str()], None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(until_leader(&c, &url));
    let (code, _) = raw_http(&addr, "PUT", "/streams/a", &[], br#"{"max_payload":4}"#);
    assert_eq!(code, 200);
    let post = |body: &[u8]| raw_http(&addr, "POST", "/streams/a/batch", &[], body);
    let msgs = |n: &str| -> String {
        let (code, body) = raw_http(&addr, "GET", "/streams/a", &[], b"");
        assert_eq!(code, 200);
        assert!(body.contains(&format!(r#""msgs":{n},"#)), "{body}");
        body
    };
    let bad_b64 =
        br#"{"messages":[{"subject":"x","payload":"y"},{"subject":"x","payload_b64":"***"}]}"#;
    assert_eq!(post(bad_b64).0, 400);
    assert_eq!(post(br#"{"messages":[]}"#).0, 400);
    assert_eq!(post(br#"{"messages":[{"subject":"x","nope":1}]}"#).0, 400);
    msgs("0");
    let mixed = br#"{"messages":[{"subject":"a.1","payload":"ok"},{"subject":"a..2","payload":"ok"},{"subject":"a.3","payload":"too long"},{"subject":"a.4","payload":"ok"}]}"#;
    let (code, body) = post(mixed);
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let r = v["results"].as_array().expect("results");
    assert_eq!(r.len(), 4, "{body}");
    assert_eq!(r[0]["seq"], 1, "{body}");
    assert_eq!(r[1]["error"]["kind"], kind::REFUSED, "{body}");
    assert_eq!(r[1]["status"], 422, "{body}");
    assert_eq!(r[2]["error"]["kind"], kind::REFUSED, "{body}");
    assert_eq!(r[3]["seq"], 2, "a refused message uses no sequence: {body}");
    msgs("2");
    let many = format!(
        r#"{{"messages":[{}]}}"#,
        vec![r#"{"subject":"x"}"#; seqstore_client::wire::MAX_BATCH + 1].join(",")
    );
    let (code, body) = post(many.as_bytes());
    assert_eq!(code, 400, "{body}");
    msgs("2");
}
