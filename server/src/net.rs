//! openraft's network over HTTP: each RPC is a `POST /raft/{append,vote,snapshot}` with a
//! postcard body (see `http::raft`), through the client crate's pooled HTTP/1.1 transport,
//! bounded by openraft's per-RPC deadline and carrying the cluster's bearer token.

use http_types::Method;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
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

impl PeerNet {
    /// Posts `req` to `path`; a refused connection is `Unreachable` (openraft backs off), any
    /// other failure a `Network` error, the peer's own error a `RemoteError`.
    async fn rpc<Req, Resp, E>(
        &self,
        path: &str,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RpcErr<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body = postcard::to_stdvec(req).map_err(|e| network(e.to_string()))?;
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
        self.rpc("/raft/append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<InstallSnapshotError>> {
        self.rpc("/raft/snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr<openraft::error::Infallible>> {
        self.rpc("/raft/vote", &rpc, &option).await
    }
}
