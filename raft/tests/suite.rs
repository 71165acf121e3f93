//! openraft's own storage suite (`Suite::test_all`, 35 functional tests) on the log storage and
//! state machine: on the real filesystem (host-fs in a temp dir) and on fault-fs.

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_fs::HostFs;
use seqstore_raft::{LogConfig, LogStore, StreamStateMachine, TypeConfig};

fn err(e: impl std::fmt::Display) -> StorageError<u64> {
    seqstore_raft::Error::Join(e.to_string())
        .to_storage(openraft::ErrorSubject::Store, openraft::ErrorVerb::Write)
}

struct HostBuilder;

impl StoreBuilder<TypeConfig, LogStore<HostFs>, StreamStateMachine<HostFs>, tempfile::TempDir>
    for HostBuilder
{
    async fn build(
        &self,
    ) -> Result<
        (
            tempfile::TempDir,
            LogStore<HostFs>,
            StreamStateMachine<HostFs>,
        ),
        StorageError<u64>,
    > {
        let dir = tempfile::tempdir().map_err(err)?;
        let log_fs = HostFs::create(dir.path().join("log")).map_err(err)?;
        let sm_fs = HostFs::create(dir.path().join("sm")).map_err(err)?;
        let log = LogStore::open(log_fs, LogConfig::default()).map_err(err)?;
        let sm = StreamStateMachine::open(sm_fs).map_err(err)?;
        Ok((dir, log, sm))
    }
}

struct FaultBuilder;

impl StoreBuilder<TypeConfig, LogStore<FaultFs>, StreamStateMachine<FaultFs>, ()> for FaultBuilder {
    async fn build(
        &self,
    ) -> Result<((), LogStore<FaultFs>, StreamStateMachine<FaultFs>), StorageError<u64>> {
        // small blocks: purge and truncate cross block boundaries
        let cfg = LogConfig::default().with_block_size(4096);
        let log = LogStore::open(FaultFs::new(Model::Posix), cfg).map_err(err)?;
        let sm = StreamStateMachine::open(FaultFs::new(Model::Posix)).map_err(err)?;
        Ok(((), log, sm))
    }
}

#[test]
fn openraft_suite_on_host_fs() {
    Suite::test_all(HostBuilder).expect("openraft storage suite on host-fs");
}

#[test]
fn openraft_suite_on_fault_fs() {
    Suite::test_all(FaultBuilder).expect("openraft storage suite on fault-fs");
}
