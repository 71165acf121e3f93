//! The transport: length-prefixed JSON frames over TCP (tokio), one persistent connection per
//! peer, reconnected on error.
//!
//! Why not HTTP, as openraft's examples use: the node needs request/response only, and tokio
//! (which openraft already requires) plus serde_json (already in the tree) do that in ~150
//! lines, where axum/hyper + reqwest would add about a hundred crates to build on a 2-core
//! machine. Frames: `u32` big-endian length, then a JSON [`Rpc`] or [`Reply`]. JSON because
//! openraft's messages derive serde (feature `serde`) and the frames are debuggable with `nc`;
//! the log on disk uses postcard.

use crate::streams::StreamDump;
use crate::types::{LogId, Op, Response, TypeConfig};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Frames larger than this are refused (a snapshot chunk is far smaller).
pub const MAX_FRAME: u32 = 64 << 20;

/// A request: raft's three RPCs, and the stream and admin API.
#[derive(Debug, Serialize, Deserialize)]
pub enum Rpc {
    /// Raft: append entries (and heartbeats).
    Append(AppendEntriesRequest<TypeConfig>),
    /// Raft: request a vote.
    Vote(VoteRequest<u64>),
    /// Raft: a snapshot chunk.
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// Streams: a write (on the leader, which stamps it with its clock; others answer
    /// `NotLeader`).
    Write(Op),
    /// Streams: linearizable read of one message (on the leader).
    Get {
        /// The stream.
        stream: String,
        /// The sequence.
        seq: u64,
    },
    /// The node's whole applied state (for checks; no leader needed).
    Dump,
    /// The node's raft status.
    Status,
}

/// The node's raft status.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// This node.
    pub id: u64,
    /// The leader it knows.
    pub leader: Option<u64>,
    /// Its current term.
    pub term: u64,
    /// Its last applied log id.
    pub last_applied: Option<LogId>,
    /// Its last log index.
    pub last_log_index: Option<u64>,
    /// The last log id its current snapshot covers.
    pub snapshot: Option<LogId>,
    /// The last log id purged from its log.
    pub purged: Option<LogId>,
}

/// A reply to an [`Rpc`].
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// To `Append`.
    Append(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    /// To `Vote`.
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    /// To `Snapshot`.
    Snapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    /// A write was committed and applied at `index`.
    Written {
        /// What applying it returned.
        response: Response,
        /// The log index of the write.
        index: u64,
    },
    /// To `Get`: the message, if the stream holds one at that sequence.
    Msg(Option<Msg>),
    /// Ask the leader instead.
    NotLeader {
        /// The leader, if known.
        leader: Option<u64>,
        /// Its address, if known.
        addr: Option<String>,
    },
    /// To `Dump`.
    Dump {
        /// The last applied log id.
        last_applied: Option<LogId>,
        /// Every stream.
        streams: BTreeMap<String, StreamDump>,
    },
    /// To `Status`.
    Status(Status),
    /// Anything else that failed.
    Err(String),
}

/// A stored message, as `Get` returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    /// Its sequence.
    pub seq: u64,
    /// Its subject.
    pub subject: String,
    /// Its timestamp (the leader's clock when it was proposed).
    pub ts: i64,
    /// Its headers.
    pub headers: Vec<u8>,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// Writes one frame.
pub async fn write_frame<T: Serialize>(s: &mut TcpStream, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    s.write_all(&buf).await
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame<T: for<'de> Deserialize<'de>>(s: &mut TcpStream) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len);
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A connection to one node, opened on first use and again after any error.
#[derive(Debug)]
pub struct Conn {
    addr: String,
    stream: Option<TcpStream>,
}

impl Conn {
    /// A connection to `addr` (not opened yet).
    pub fn new(addr: impl Into<String>) -> Self {
        Conn {
            addr: addr.into(),
            stream: None,
        }
    }

    /// The address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `rpc` and waits for the reply, at most `timeout` in all.
    pub async fn call(&mut self, rpc: &Rpc, timeout: Duration) -> io::Result<Reply> {
        match tokio::time::timeout(timeout, self.call_inner(rpc)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.stream = None;
                Err(e)
            }
            Err(_) => {
                self.stream = None;
                Err(io::Error::new(io::ErrorKind::TimedOut, "rpc timed out"))
            }
        }
    }

    async fn call_inner(&mut self, rpc: &Rpc) -> io::Result<Reply> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.addr).await?;
            s.set_nodelay(true)?;
            self.stream = Some(s);
        }
        let s = self.stream.as_mut().expect("connected");
        write_frame(s, rpc).await?;
        read_frame(s)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"))
    }
}

/// openraft's network factory: one [`PeerNet`] per target.
#[derive(Clone, Debug, Default)]
pub struct NetFactory;

impl RaftNetworkFactory<TypeConfig> for NetFactory {
    type Network = PeerNet;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> PeerNet {
        PeerNet {
            target,
            conn: Conn::new(node.addr.clone()),
        }
    }
}

/// The raft RPCs to one peer.
#[derive(Debug)]
pub struct PeerNet {
    target: u64,
    conn: Conn,
}

type RpcErr<E = RaftError<u64>> = RPCError<u64, BasicNode, E>;

impl PeerNet {
    /// Sends `rpc`; a connection failure is `Unreachable` (openraft backs off), a broken or
    /// timed-out exchange a `Network` error.
    async fn send<E: std::error::Error>(
        &mut self,
        rpc: Rpc,
        option: &RPCOption,
    ) -> Result<Reply, RpcErr<E>> {
        let t = option.hard_ttl();
        self.conn.call(&rpc, t).await.map_err(|e| {
            if e.kind() == io::ErrorKind::ConnectionRefused {
                RPCError::Unreachable(Unreachable::new(&e))
            } else {
                RPCError::Network(NetworkError::new(&e))
            }
        })
    }

    fn unexpected<E: std::error::Error>(r: Reply) -> RpcErr<E> {
        let e = io::Error::other(format!("unexpected reply {r:?}"));
        RPCError::Network(NetworkError::new(&e))
    }
}

impl RaftNetwork<TypeConfig> for PeerNet {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr> {
        match self.send(Rpc::Append(rpc), &option).await? {
            Reply::Append(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<RaftError<u64, InstallSnapshotError>>> {
        match self.send(Rpc::Snapshot(rpc), &option).await? {
            Reply::Snapshot(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr> {
        match self.send(Rpc::Vote(rpc), &option).await? {
            Reply::Vote(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(other)),
        }
    }
}
