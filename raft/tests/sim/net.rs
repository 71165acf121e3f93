//! The simulated network: every RPC is a call on the target node's `Raft` handle, in the same
//! process and thread, after a seeded decision to drop it, delay it (and so reorder it with the
//! others) or cut it by a partition. A node that crashed answers nothing: each incarnation of a
//! node has a number, and a request or a reply that crosses a crash of either end is lost.

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};
use seqstore_fault_fs::{FaultFs, Rng};
use seqstore_raft::sharedfs::SubFs;
use seqstore_raft::LogStore;
use seqstore_raft::TypeConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::trace::Trace;

pub type NodeRaft = Raft<TypeConfig>;

/// A node's raft log in the simulation.
pub type SimLog = LogStore<SubFs<FaultFs>>;

/// A running node as its peers reach it: openraft, and its log (whose damage gate answers a
/// vote request first: `seqstore_raft::gate`).
#[derive(Clone)]
pub struct Up {
    pub raft: NodeRaft,
    pub log: SimLog,
}

/// What the network does to messages now.
#[derive(Clone, Debug, Default)]
pub struct Weather {
    /// Percent of messages (requests and replies alike) lost.
    pub drop_pct: u64,
    /// Each message is delayed by 0..=max_delay_ms.
    pub max_delay_ms: u64,
    /// Percent of requests delivered a second time, up to 150 ms later.
    pub dup_pct: u64,
    /// Nodes cut off from the others (both ways); empty: no partition.
    pub isolated: BTreeSet<u64>,
}

/// The state shared by every node's network and the simulation driver.
pub struct NetState {
    /// The running incarnation of each node: its number, its `Raft` and its log.
    pub up: BTreeMap<u64, (u64, Up)>,
    pub weather: Weather,
    pub rng: Rng,
    pub trace: Trace,
    /// Messages by kind (append, vote, snapshot, reply).
    pub messages: BTreeMap<&'static str, u64>,
}

#[derive(Clone)]
pub struct Net(pub Arc<Mutex<NetState>>);

impl Net {
    pub fn new(seed: u64) -> Self {
        Net(Arc::new(Mutex::new(NetState {
            up: BTreeMap::new(),
            weather: Weather::default(),
            rng: Rng::new(seed),
            trace: Trace::default(),
            messages: BTreeMap::new(),
        })))
    }

    pub fn lock(&self) -> MutexGuard<'_, NetState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The factory for incarnation `inc` of node `id`.
    pub fn factory(&self, id: u64, inc: u64) -> Factory {
        Factory {
            net: self.clone(),
            from: id,
            inc,
        }
    }
}

impl NetState {
    fn alive(&self, id: u64, inc: u64) -> bool {
        self.up.get(&id).is_some_and(|(i, _)| *i == inc)
    }

    fn cut(&self, a: u64, b: u64) -> bool {
        let w = &self.weather;
        w.isolated.contains(&a) != w.isolated.contains(&b)
    }

    /// A message's fate: `None` lost, else its delay.
    fn fate(&mut self, from: u64, to: u64, what: &'static str) -> Option<Duration> {
        *self.messages.entry(what).or_default() += 1;
        let lost = self.cut(from, to) || self.rng.chance(self.weather.drop_pct);
        let ms = self.rng.within(0, self.weather.max_delay_ms);
        self.trace.fine(&(from, to, what, lost, ms));
        (!lost).then(|| Duration::from_millis(ms))
    }
}

pub struct Factory {
    net: Net,
    from: u64,
    inc: u64,
}

impl RaftNetworkFactory<TypeConfig> for Factory {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Peer {
        Peer {
            net: self.net.clone(),
            from: self.from,
            inc: self.inc,
            target,
        }
    }
}

pub struct Peer {
    net: Net,
    from: u64,
    inc: u64,
    target: u64,
}

type RpcErr<E = RaftError<u64>> = RPCError<u64, BasicNode, E>;

fn lost<E: std::error::Error>(why: &str) -> RpcErr<E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(why.to_string())))
}

/// How long a sender waits for an answer that never comes (below openraft's RPC timeouts is
/// not needed: openraft cancels the call itself when its own timeout is shorter).
const LOST_AFTER: Duration = Duration::from_millis(60);

impl Peer {
    /// Delivers one request and its reply through the weather. Errors are never `Unreachable`:
    /// openraft answers that with a backoff whose `select!` is not biased (tokio's random
    /// branch order would make the run irreproducible).
    async fn call<R, T, E, Fut>(
        &self,
        what: &'static str,
        req: R,
        f: impl Fn(Up, R) -> Fut + Copy + Send + 'static,
    ) -> Result<T, RPCError<u64, BasicNode, E>>
    where
        R: Clone + Send + 'static,
        E: std::error::Error,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let fate = self.net.lock().fate(self.from, self.target, what);
        let Some(d) = fate else {
            tokio::time::sleep(LOST_AFTER).await;
            return Err(lost("request lost"));
        };
        tokio::time::sleep(d).await;
        let target = {
            let st = self.net.lock();
            if !st.alive(self.from, self.inc) {
                None
            } else {
                st.up.get(&self.target).cloned()
            }
        };
        let Some((tinc, node)) = target else {
            tokio::time::sleep(LOST_AFTER).await;
            return Err(lost("no one there"));
        };
        self.maybe_duplicate(what, tinc, node.clone(), req.clone(), f);
        let r = f(node, req).await;
        let back = self.net.lock().fate(self.target, self.from, "reply");
        let Some(d) = back else {
            tokio::time::sleep(LOST_AFTER).await;
            return Err(lost("reply lost"));
        };
        tokio::time::sleep(d).await;
        {
            let st = self.net.lock();
            if !st.alive(self.from, self.inc) || !st.alive(self.target, tinc) {
                return Err(lost("an end crashed"));
            }
        }
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl Peer {
    /// Delivers the request a second time, later, to the same incarnation of the target (a
    /// retransmission that arrives after the original): its answer goes nowhere.
    fn maybe_duplicate<R, Fut>(
        &self,
        what: &'static str,
        tinc: u64,
        node: Up,
        req: R,
        f: impl Fn(Up, R) -> Fut + Send + 'static,
    ) where
        R: Send + 'static,
        Fut: Future + Send + 'static,
    {
        let delay = {
            let mut st = self.net.lock();
            let pct = st.weather.dup_pct;
            let dup = st.rng.chance(pct);
            let ms = st.rng.within(1, 150);
            st.trace
                .fine(&(self.from, self.target, what, "dup", dup, ms));
            if dup {
                *st.messages.entry("duplicate").or_default() += 1;
            }
            dup.then(|| Duration::from_millis(ms))
        };
        let Some(delay) = delay else { return };
        let (net, target) = (self.net.clone(), self.target);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if net.lock().alive(target, tinc) {
                let _ = f(node, req).await;
            }
        });
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr> {
        self.call("append", rpc, |n, q| async move {
            n.raft.append_entries(q).await
        })
        .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<RaftError<u64, InstallSnapshotError>>> {
        self.call("snapshot", rpc, |n, q| async move {
            n.raft.install_snapshot(q).await
        })
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr> {
        self.call("vote", rpc, |n, q| async move {
            seqstore_raft::gate::vote(&n.raft, &n.log, q).await
        })
        .await
    }
}
