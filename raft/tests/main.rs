//! The replicated stream's tests: the storage suite, the state machine, crashes and the whole-cluster simulation.
//! Each module is one file of this directory, as its own binary was before; one binary
//! per crate links the dependencies once.

// shared by sim and follower_ack: the log wrapper macro (before the modules that use it)
#[macro_use]
#[path = "sim/wrap.rs"]
mod wrap;
// a network that is never called, for one-node rafts
#[path = "support/nowhere.rs"]
mod nowhere;
// the entries the log's own tests append
#[path = "support/entries.rs"]
mod entries;

mod batch;
mod crash;
mod damage;
mod failed_fsync;
mod follower_ack;
mod reopen;
mod sim;
mod stream_sm;
mod stream_sm_consumers;
mod stream_sm_crash;
mod suite;
