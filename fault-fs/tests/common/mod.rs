//! Random operation sequences shared by the property tests.
#![allow(dead_code)] // each test binary uses a different part

use proptest::prelude::*;
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use std::io;

/// Paths over a small namespace so that operations collide often: files, directories, missing
/// parents, paths through files, the root, and invalid paths.
pub const PATHS: &[&str] = &[
    "a", "b", "d", "d/a", "d/b", "d/e", "d/e/a", "e", "a/x", "x/a", "", "./d", "../a",
];

pub fn path() -> impl Strategy<Value = &'static str> {
    prop::sample::select(PATHS)
}

/// Paths other than the root for rename/remove (the root's refusal is a separate rule).
pub fn non_root() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&PATHS[..PATHS.len() - 3])
}

#[derive(Clone, Debug)]
pub enum Op {
    Open(&'static str, OpenOptions),
    Write {
        h: usize,
        off: u64,
        len: usize,
        byte: u8,
    },
    Read {
        h: usize,
        off: u64,
        len: usize,
    },
    Len(usize),
    SetLen(usize, u64),
    SyncData(usize),
    SyncAll(usize),
    Close(usize),
    CreateDir(&'static str),
    ReadDir(&'static str),
    Rename(&'static str, &'static str),
    RemoveFile(&'static str),
    RemoveDirAll(&'static str),
    SyncDir(&'static str),
}

pub fn op() -> impl Strategy<Value = Op> {
    let opts = (any::<[bool; 5]>()).prop_map(|[r, w, c, n, t]| OpenOptions {
        read: r,
        write: w,
        create: c,
        create_new: n,
        truncate: t,
    });
    let h = 0usize..4;
    prop_oneof![
        3 => (path(), opts).prop_map(|(p, o)| Op::Open(p, o)),
        3 => (h.clone(), 0u64..3000, 0usize..1500, any::<u8>())
            .prop_map(|(h, off, len, byte)| Op::Write { h, off, len, byte }),
        2 => (h.clone(), 0u64..3000, 0usize..1500).prop_map(|(h, off, len)| Op::Read { h, off, len }),
        1 => h.clone().prop_map(Op::Len),
        1 => (h.clone(), 0u64..4000).prop_map(|(h, l)| Op::SetLen(h, l)),
        1 => h.clone().prop_map(Op::SyncData),
        1 => h.clone().prop_map(Op::SyncAll),
        1 => h.prop_map(Op::Close),
        2 => path().prop_map(Op::CreateDir),
        1 => path().prop_map(Op::ReadDir),
        2 => (non_root(), non_root()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => path().prop_map(Op::RemoveFile),
        1 => path().prop_map(Op::RemoveDirAll),
        1 => path().prop_map(Op::SyncDir),
    ]
}

/// What an operation returned, comparable across backends.
#[derive(Debug, PartialEq)]
pub enum Out {
    Unit,
    Bytes(Vec<u8>),
    Len(u64),
    Entries(Vec<seqstore_core::fs::DirEntry>),
    Err(io::ErrorKind),
    NoHandle,
}

fn out<T>(r: io::Result<T>, f: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => f(v),
        Err(e) => Out::Err(e.kind()),
    }
}

/// One backend with its table of open handles (slot = the op's handle number).
pub struct Side<F: Fs> {
    pub fs: F,
    pub handles: Vec<Option<F::File>>,
}

impl<F: Fs> Side<F> {
    pub fn new(fs: F) -> Self {
        Side {
            fs,
            handles: (0..4).map(|_| None).collect(),
        }
    }

    pub fn apply(&mut self, op: &Op) -> Out {
        let unit = |_| Out::Unit;
        match op {
            Op::Open(p, o) => match self.fs.open(p, *o) {
                Ok(f) => {
                    // the first free slot, else replace slot 0
                    let slot = self.handles.iter().position(Option::is_none).unwrap_or(0);
                    self.handles[slot] = Some(f);
                    Out::Unit
                }
                Err(e) => Out::Err(e.kind()),
            },
            Op::Close(h) => {
                self.handles[*h] = None;
                Out::Unit
            }
            Op::Write { h, off, len, byte } => match &self.handles[*h] {
                Some(f) => out(f.write_all_at(&vec![*byte; *len], *off), unit),
                None => Out::NoHandle,
            },
            Op::Read { h, off, len } => match &self.handles[*h] {
                Some(f) => {
                    let mut buf = vec![0u8; *len];
                    out(f.read_at(&mut buf, *off), |n| Out::Bytes(buf[..n].to_vec()))
                }
                None => Out::NoHandle,
            },
            Op::Len(h) => match &self.handles[*h] {
                Some(f) => out(f.len(), Out::Len),
                None => Out::NoHandle,
            },
            Op::SetLen(h, l) => match &self.handles[*h] {
                Some(f) => out(f.set_len(*l), unit),
                None => Out::NoHandle,
            },
            Op::SyncData(h) => match &self.handles[*h] {
                Some(f) => out(f.sync_data(), unit),
                None => Out::NoHandle,
            },
            Op::SyncAll(h) => match &self.handles[*h] {
                Some(f) => out(f.sync_all(), unit),
                None => Out::NoHandle,
            },
            Op::CreateDir(p) => out(self.fs.create_dir(p), unit),
            Op::ReadDir(p) => out(self.fs.read_dir(p), Out::Entries),
            Op::Rename(a, b) => out(self.fs.rename(a, b), unit),
            Op::RemoveFile(p) => out(self.fs.remove_file(p), unit),
            Op::RemoveDirAll(p) => out(self.fs.remove_dir_all(p), unit),
            Op::SyncDir(p) => out(self.fs.sync_dir(p), unit),
        }
    }

    /// The whole tree through the trait: (path, contents or None for a directory).
    pub fn tree(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(dir) = stack.pop() {
            for e in self.fs.read_dir(&dir).unwrap() {
                let p = if dir.is_empty() {
                    e.name.clone()
                } else {
                    format!("{dir}/{}", e.name)
                };
                if e.is_dir {
                    out.push((p.clone(), None));
                    stack.push(p);
                } else {
                    let f = self.fs.open(&p, OpenOptions::read_only()).unwrap();
                    let mut buf = vec![0u8; f.len().unwrap() as usize];
                    f.read_exact_at(&mut buf, 0).unwrap();
                    out.push((p, Some(buf)));
                }
            }
        }
        out.sort();
        out
    }
}
