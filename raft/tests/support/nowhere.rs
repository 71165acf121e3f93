//! A network where every peer is unreachable: for tests of one node, which needs none.

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use seqstore_raft::TypeConfig;

pub struct Nowhere;

type RpcErr<E = RaftError<u64>> = RPCError<u64, BasicNode, E>;

fn unreachable<E: std::error::Error>() -> RpcErr<E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(
        "no network in this test",
    )))
}

impl RaftNetworkFactory<TypeConfig> for Nowhere {
    type Network = Nowhere;
    async fn new_client(&mut self, _target: u64, _node: &BasicNode) -> Nowhere {
        Nowhere
    }
}

impl RaftNetwork<TypeConfig> for Nowhere {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr> {
        Err(unreachable())
    }
    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<RaftError<u64, InstallSnapshotError>>> {
        Err(unreachable())
    }
    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr> {
        Err(unreachable())
    }
}
