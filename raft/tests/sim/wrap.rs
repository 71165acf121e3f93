//! `delegate_to_log!`: a log storage that wraps the real `LogStore` (in its field `log`) and
//! changes only what `append` does, through its own `async fn append_vec(&mut self, Vec<Entry>,
//! LogFlushed<TypeConfig>)`. Every other storage call goes to the log unchanged.

macro_rules! delegate_to_log {
    ($wrapper:ident) => {
        impl<F: seqstore_core::Fs + 'static> openraft::RaftLogReader<seqstore_raft::TypeConfig>
            for $wrapper<F>
        {
            async fn try_get_log_entries<
                RB: std::ops::RangeBounds<u64> + Clone + std::fmt::Debug + openraft::OptionalSend,
            >(
                &mut self,
                range: RB,
            ) -> Result<Vec<seqstore_raft::Entry>, openraft::StorageError<u64>> {
                self.log.try_get_log_entries(range).await
            }
        }

        impl<F: seqstore_core::Fs + 'static>
            openraft::storage::RaftLogStorage<seqstore_raft::TypeConfig> for $wrapper<F>
        {
            type LogReader = seqstore_raft::LogReader<F>;

            async fn get_log_state(
                &mut self,
            ) -> Result<
                openraft::storage::LogState<seqstore_raft::TypeConfig>,
                openraft::StorageError<u64>,
            > {
                self.log.get_log_state().await
            }
            async fn get_log_reader(&mut self) -> seqstore_raft::LogReader<F> {
                self.log.get_log_reader().await
            }
            async fn save_vote(
                &mut self,
                vote: &seqstore_raft::Vote,
            ) -> Result<(), openraft::StorageError<u64>> {
                self.log.save_vote(vote).await
            }
            async fn read_vote(
                &mut self,
            ) -> Result<Option<seqstore_raft::Vote>, openraft::StorageError<u64>> {
                self.log.read_vote().await
            }
            async fn save_committed(
                &mut self,
                c: Option<seqstore_raft::LogId>,
            ) -> Result<(), openraft::StorageError<u64>> {
                self.log.save_committed(c).await
            }
            async fn read_committed(
                &mut self,
            ) -> Result<Option<seqstore_raft::LogId>, openraft::StorageError<u64>> {
                self.log.read_committed().await
            }
            async fn append<I>(
                &mut self,
                entries: I,
                cb: openraft::storage::LogFlushed<seqstore_raft::TypeConfig>,
            ) -> Result<(), openraft::StorageError<u64>>
            where
                I: IntoIterator<Item = seqstore_raft::Entry> + openraft::OptionalSend,
                I::IntoIter: openraft::OptionalSend,
            {
                self.append_vec(entries.into_iter().collect(), cb).await
            }
            async fn truncate(
                &mut self,
                log_id: seqstore_raft::LogId,
            ) -> Result<(), openraft::StorageError<u64>> {
                self.log.truncate(log_id).await
            }
            async fn purge(
                &mut self,
                log_id: seqstore_raft::LogId,
            ) -> Result<(), openraft::StorageError<u64>> {
                self.log.purge(log_id).await
            }
        }
    };
}
