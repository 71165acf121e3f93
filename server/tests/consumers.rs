//! Durable consumers over HTTP on a one-node server (a real process), through
//! `seqstore-client`: add (again with the same settings, and with others), pulls in order,
//! acks, the ack floor, redelivery after the ack wait, and each refusal's typed error; then
//! the consumer's state after a `kill -9` and a restart from the directory.

mod common;
use common::*;
use seqstore_client::wire::{
    kind, AckPolicy, AppendRequest, ConsumerConfig, NextRequest, StreamConfig,
};
use seqstore_client::{Client, Error};
use std::time::Duration;

const UP: Duration = Duration::from_secs(15);

fn kind_of(e: &Error) -> String {
    match e {
        Error::Api { kind, .. } => kind.clone(),
        Error::UnknownStream(_) => kind::UNKNOWN_STREAM.into(),
        other => format!("{other:?}"),
    }
}

/// Pulls `batch` and returns the stream sequences delivered.
async fn pull(c: &Client, batch: u32, ack_wait_ms: u64) -> Vec<u64> {
    let req = NextRequest {
        batch,
        ack_wait_ms,
        ..NextRequest::default()
    };
    let ds = c.consumer_next("s", "w", &req).await.expect("pull");
    ds.iter().map(|d| d.message.seq).collect()
}

async fn scenario(c: &Client) {
    c.create_stream("s", &StreamConfig::default())
        .await
        .expect("create");
    for i in 0..4 {
        let req = AppendRequest::new("s.a", format!("m{i}").as_bytes());
        c.append("s", &req).await.expect("append");
    }
    let cfg = ConsumerConfig::default();
    c.consumer_add("s", "w", &cfg).await.expect("add");
    c.consumer_add("s", "w", &cfg)
        .await
        .expect("the same settings again");
    let other = ConsumerConfig {
        ack_policy: AckPolicy::All,
        max_deliver: 0,
    };
    let e = c
        .consumer_add("s", "w", &other)
        .await
        .expect_err("other settings");
    assert_eq!(kind_of(&e), kind::CONSUMER_EXISTS);
    assert_eq!(pull(c, 2, 0).await, vec![1, 2]);
    c.consumer_ack("s", "w", 1).await.expect("ack 1");
    let e = c.consumer_ack("s", "w", 1).await.expect_err("acked twice");
    assert_eq!(kind_of(&e), kind::NOT_PENDING);
    let e = c
        .consumer_ack("s", "w", 4)
        .await
        .expect_err("never delivered");
    assert_eq!(kind_of(&e), kind::NOT_PENDING);
    let i = c.consumer_info("s", "w").await.expect("info");
    assert_eq!((i.ack_floor.stream, i.delivered.stream), (1, 2), "{i:?}");
    let pending: Vec<u64> = i.pending.iter().map(|p| p.stream_seq).collect();
    assert_eq!(pending, vec![2]);
    // seq 2 waits for its ack: with an ack wait of 1 ms of the log's time it is redelivered
    // first (the next entry's time is later than its delivery's)
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(pull(c, 2, 1).await, vec![2, 3]);
    assert_eq!(pull(c, 1, 0).await, vec![4]);
    assert_eq!(pull(c, 1, 0).await, Vec::<u64>::new(), "nothing left");
    let e = c.consumer_info("s", "nobody").await.expect_err("unknown");
    assert_eq!(kind_of(&e), kind::UNKNOWN_CONSUMER);
    let e = c
        .consumer_add("s", "bad.name", &cfg)
        .await
        .expect_err("bad name");
    assert_eq!(kind_of(&e), kind::INVALID_CONSUMER_NAME);
    let e = c
        .consumer_names("nostream")
        .await
        .expect_err("unknown stream");
    assert_eq!(kind_of(&e), kind::UNKNOWN_STREAM);
    assert_eq!(
        c.consumer_names("s").await.expect("names"),
        vec!["w".to_string()]
    );
}

#[test]
fn consumers_over_http_survive_a_restart() {
    let mut p = Procs::new();
    let addr = free_addr();
    let url = format!("http://{addr}");
    let args = vec!["--listen".to_string(), addr.clone()];
    p.spawn(1, &args);
    wait_up(&addr, UP);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let c = Client::new(&[url.as_str()], None);
    rt.block_on(async {
        until_leader(&c, &url).await;
        scenario(&c).await;
    });
    let before = rt.block_on(c.consumer_info("s", "w")).expect("info");
    p.kill9(1);
    p.spawn(1, &args);
    wait_up(&addr, UP);
    rt.block_on(async {
        until_leader(&c, &url).await;
        let after = c.consumer_info("s", "w").await.expect("info after restart");
        assert_eq!(
            after, before,
            "the consumer's state after kill -9 and restart"
        );
        c.consumer_delete("s", "w").await.expect("delete");
        let e = c.consumer_info("s", "w").await.expect_err("deleted");
        assert_eq!(kind_of(&e), kind::UNKNOWN_CONSUMER);
    });
}
