//! seqstore's storage core: a message-stream store written against the [`Fs`] trait.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod fs;
#[cfg(feature = "conformance")]
pub mod conformance;

pub use fs::{DirEntry, Fs, FsFile, OpenOptions};
