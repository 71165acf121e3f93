//! The crate's openraft [`AsyncRuntime`]: tokio, with a random number generator an embedder
//! can seed.
//!
//! openraft draws its election timeouts from `AsyncRuntime::thread_rng()`; tokio's runtime
//! (`openraft::TokioRuntime`) returns the OS-seeded `rand::thread_rng()`, so two runs of the same
//! cluster elect differently. [`Runtime`] is the same tokio runtime (spawn, sleep, timeouts,
//! `tokio::time::Instant`, oneshot channels), except that inside [`with_seed`] (and in every
//! task openraft spawns from there: [`Runtime::spawn`] carries the generator into the task) the
//! generator is a splitmix64 stream started at the given seed. Outside it nothing changes: the
//! OS-seeded generator. The whole-cluster simulation (`tests/sim.rs`) runs each node inside
//! `with_seed(node_seed, ...)`, so election timeouts replay from the run's seed.

use openraft::{AsyncRuntime, OptionalSend, TokioInstant};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

tokio::task_local! {
    static SEEDED: Arc<Mutex<u64>>;
}

/// Runs `fut` with openraft's random numbers drawn from a generator started at `seed` (in
/// `fut` and in every task openraft spawns from it through [`Runtime`]).
pub async fn with_seed<T>(seed: u64, fut: impl Future<Output = T>) -> T {
    SEEDED.scope(Arc::new(Mutex::new(seed)), fut).await
}

/// tokio, with a seedable random number generator (see the module doc).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Runtime;

/// What [`Runtime::thread_rng`] returns: the task's seeded stream, or the OS-seeded one.
#[derive(Debug)]
pub enum Rng {
    /// splitmix64 shared by the tasks of one [`with_seed`] scope.
    Seeded(Arc<Mutex<u64>>),
    /// `rand::thread_rng()`.
    Os(rand::rngs::ThreadRng),
}

fn splitmix(state: &Mutex<u64>) -> u64 {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl rand::RngCore for Rng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        match self {
            Rng::Seeded(s) => splitmix(s),
            Rng::Os(r) => r.next_u64(),
        }
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let b = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

type Tokio = openraft::TokioRuntime;

impl AsyncRuntime for Runtime {
    type JoinError = <Tokio as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <Tokio as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <Tokio as AsyncRuntime>::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = <Tokio as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <Tokio as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = Rng;
    type OneshotSender<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <Tokio as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        match SEEDED.try_with(Arc::clone) {
            Ok(seed) => Tokio::spawn(SEEDED.scope(seed, future)),
            Err(_) => Tokio::spawn(future),
        }
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Tokio::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Tokio::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        Tokio::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        Tokio::is_panic(join_error)
    }

    fn thread_rng() -> Rng {
        match SEEDED.try_with(Arc::clone) {
            Ok(s) => Rng::Seeded(s),
            Err(_) => Rng::Os(rand::thread_rng()),
        }
    }

    fn oneshot<T: OptionalSend>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>) {
        Tokio::oneshot()
    }
}
