//! openraft's network over HTTP: each RPC is a `POST /raft/{append,vote,snapshot}` with a
//! postcard body (see `http::raft`), through the client crate's pooled HTTP/1.1 transport,
//! bounded by openraft's per-RPC deadline and carrying the cluster's bearer token.

use crate::http::RAFT_MAX_BODY;
use http_types::Method;
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use seqstore_client::wire::node_url;
use seqstore_client::{SendError, Transport};
use seqstore_raft::TypeConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;

use axum::http as http_types;

/// The factory: one [`PeerNet`] per target, all sharing one connection pool.
#[derive(Clone, Debug)]
pub struct HttpNetwork {
    transport: Transport,
}

impl HttpNetwork {
    /// A network sending `token` to the peers.
    pub fn new(token: Option<String>) -> Self {
        HttpNetwork {
            transport: Transport::new(token),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = PeerNet;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> PeerNet {
        PeerNet {
            target,
            base: node_url(&node.addr),
            transport: self.transport.clone(),
        }
    }
}

/// The raft RPCs to one peer.
#[derive(Debug)]
pub struct PeerNet {
    target: u64,
    base: String,
    transport: Transport,
}

type RpcErr<E> = RPCError<u64, BasicNode, RaftError<u64, E>>;

fn network<E: std::error::Error>(m: String) -> RPCError<u64, BasicNode, E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(m)))
}

fn encode<T: Serialize>(req: &T) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(req).map_err(|e| e.to_string())
}

impl PeerNet {
    /// Posts `req` to `path`; a refused connection is `Unreachable` (openraft backs off), any
    /// other failure a `Network` error, the peer's own error a `RemoteError`.
    async fn rpc<Resp, E>(
        &self,
        path: &str,
        body: Vec<u8>,
        option: &RPCOption,
    ) -> Result<Resp, RpcErr<E>>
    where
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let url = format!("{}{path}", self.base);
        let ct = "application/octet-stream";
        let sent = self
            .transport
            .send(Method::POST, &url, ct, body.into(), option.hard_ttl());
        let (status, bytes) = sent.await.map_err(|e| match e {
            e @ SendError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&e)),
            e => network(e.to_string()),
        })?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(network(format!("{url}: HTTP {status}: {text}")));
        }
        let r: Result<Resp, RaftError<u64, E>> =
            postcard::from_bytes(&bytes).map_err(|e| network(format!("{url}: {e}")))?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerNet {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr<openraft::error::Infallible>> {
        let body = encode(&rpc).map_err(network)?;
        // over the peer's body limit: openraft retries with fewer entries (one entry always
        // fits: a message is at most 32 MiB of payload and 1 MiB of headers)
        if body.len() > RAFT_MAX_BODY && rpc.entries.len() > 1 {
            let hint = (rpc.entries.len() / 2) as u64;
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(hint),
            ));
        }
        self.rpc("/raft/append", body, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<InstallSnapshotError>> {
        self.rpc("/raft/snapshot", encode(&rpc).map_err(network)?, &option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr<openraft::error::Infallible>> {
        self.rpc("/raft/vote", encode(&rpc).map_err(network)?, &option)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{EntryPayload, LogId, Vote};
    use seqstore_raft::{Entry, Op, Request};
    use std::time::Duration;

    fn entry(index: u64, bytes: usize) -> Entry {
        let op = Op::Append {
            stream: "s".into(),
            subject: "a".into(),
            headers: Vec::new(),
            payload: vec![7; bytes],
            ttl_ms: 0,
        };
        Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Request { ts: 0, op }),
        }
    }

    /// A batch over the peers' body limit is not sent: openraft is told to send fewer
    /// entries (the target here is unreachable, so anything sent would fail otherwise).
    #[tokio::test]
    async fn an_append_batch_over_the_body_limit_asks_for_fewer_entries() {
        let mut f = HttpNetwork::new(None);
        let mut peer = f.new_client(2, &BasicNode::new("127.0.0.1:9")).await;
        let half = RAFT_MAX_BODY / 2 + 1;
        let rpc = AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            entries: vec![entry(1, half), entry(2, half)],
            leader_commit: None,
        };
        let r = peer
            .append_entries(rpc, RPCOption::new(Duration::from_secs(1)))
            .await;
        match r {
            Err(RPCError::PayloadTooLarge(p)) => assert_eq!(p.entries_hint(), 1),
            other => panic!("{other:?}"),
        }
    }
}
