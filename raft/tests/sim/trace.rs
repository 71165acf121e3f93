//! The run's trace: every decision and outcome hashed in order (FNV-1a of its `Debug` text),
//! and the coarse events kept as text for the failure report.

use std::fmt::Debug;

pub struct Trace {
    hash: u64,
    /// The coarse events (faults, client outcomes, checks), numbered by step.
    pub events: Vec<String>,
    pub fine_count: u64,
}

impl Default for Trace {
    fn default() -> Self {
        Trace {
            hash: 0xcbf2_9ce4_8422_2325,
            events: Vec::new(),
            fine_count: 0,
        }
    }
}

impl Trace {
    fn mix(&mut self, text: &str) {
        for b in text.bytes().chain([0xff]) {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(0x100_0000_01b3);
        }
    }

    /// A fine-grained decision (a message's fate): hashed only.
    pub fn fine(&mut self, what: &impl Debug) {
        self.fine_count += 1;
        self.mix(&format!("{what:?}"));
    }

    /// A coarse event: hashed and kept.
    pub fn event(&mut self, text: String) {
        self.mix(&text);
        self.events.push(text);
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }
}
