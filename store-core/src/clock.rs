//! Time, as the store sees it. store-core never reads a clock itself: the embedder passes one,
//! so tests, the crash explorer and the wasm guest control time exactly.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A source of timestamps in nanoseconds since the Unix epoch.
pub trait Clock: Send + Sync {
    /// The current time, ns since the epoch. Need not be monotonic; the store never lets a
    /// message timestamp go backwards (it uses `max(now, last_ts)`).
    fn now_ns(&self) -> i64;
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock showing `ns`.
    pub fn new(ns: i64) -> Self {
        ManualClock(Arc::new(AtomicI64::new(ns)))
    }
    /// Sets the time.
    pub fn set(&self, ns: i64) {
        self.0.store(ns, Ordering::SeqCst);
    }
    /// Moves the time forward by `ns`.
    pub fn advance(&self, ns: i64) {
        self.0.fetch_add(ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A boxed clock is a clock (for [`crate::StoreBuilder::clock`] with a `Box<dyn Clock>`).
impl<C: Clock + ?Sized> Clock for Box<C> {
    fn now_ns(&self) -> i64 {
        (**self).now_ns()
    }
}
