//! The store commands (the `seqstore-commands` crate runs them): natively, or with `--guest`
//! in the wasm guest through wasm-host, and their output as text or `--json`.

use seqstore_commands::{
    execute, is_locked, prepare_dir, report, retry_locked, run_and_close, Error, Output, StoreCmd,
    EXIT_FAILED,
};
use seqstore_core::surface::StreamStore;
use seqstore_core::{RecoveryReport, StreamState};
use std::process::ExitCode;

use crate::CliExtra;

/// Runs one store command and prints its output; the exit code is the shared crate's
/// convention (0, 1 for a store error, 2 for a usage error).
pub(crate) fn store_cmd(cmd: &StoreCmd<CliExtra>) -> ExitCode {
    let at = cmd.target();
    // `--ablation` exists only in the crash lab's build.
    #[cfg(feature = "ablation")]
    let base = match crate::lab::store_config(at) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("seqstore: {e:#}");
            return ExitCode::from(seqstore_commands::EXIT_USAGE);
        }
    };
    #[cfg(not(feature = "ablation"))]
    let base = seqstore_core::Config::default();
    // verify reads the files without a store, natively
    let result = if !at.extra.server.is_empty() {
        crate::remote::run(
            cmd,
            &at.extra.server,
            &at.extra.stream,
            at.extra.token.clone(),
        )
    } else if at.extra.guest && !matches!(cmd, StoreCmd::Verify { .. }) {
        in_guest(cmd, base)
    } else {
        execute(cmd, base, "seqstore")
    };
    match result {
        Ok(out) => ExitCode::from(out.print(at.json, "seqstore")),
        Err(e) => {
            eprintln!("seqstore: {}", report(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `--guest`: the same command on the store running in the wasm sandbox, on the same
/// directory.
fn in_guest(
    cmd: &StoreCmd<CliExtra>,
    base: seqstore_core::Config,
) -> seqstore_commands::Result<Output> {
    let at = cmd.target();
    prepare_dir(&at.dir, cmd.creates())?;
    let cfg = at.layered_config(base)?;
    let open = || {
        seqstore_wasm::GuestStore::open_dir(
            &at.dir,
            cfg.clone(),
            Box::new(seqstore_fs::SystemClock),
        )
    };
    let locked =
        |e: &seqstore_wasm::Error| matches!(e, seqstore_wasm::Error::Store(e) if is_locked(e));
    let g = retry_locked(at.wait, locked, open).map_err(|(e, waited)| match e {
        seqstore_wasm::Error::Store(e) if is_locked(&e) => Error::Busy {
            dir: at.dir.clone(),
            waited,
            source: Box::new(e),
        },
        e => Error::Recover {
            dir: at.dir.clone(),
            guest: true,
            source: Box::new(e),
        },
    })?;
    let rep = g.recovery_report();
    if rep.lost_data() {
        eprintln!("seqstore: recovery repaired damage: {rep:?}");
    }
    run_and_close(Guest(g), cmd, &seqstore_fs::SystemClock)
}

/// The wasm guest for the shared commands.
struct Guest(seqstore_wasm::GuestStore);

fn backend(e: seqstore_wasm::Error) -> Error {
    Error::Backend(Box::new(e))
}

/// The guest's operations, their errors as the commands' [`Error::Backend`].
impl StreamStore for Guest {
    type Error = Error;

    seqstore_core::forward_stream_ops!(
        [acked sync_purge changes reads] seqstore_wasm::GuestStore, this => &mut this.0, backend
    );
    fn state(&mut self) -> seqstore_commands::Result<StreamState> {
        self.0.state().map_err(backend)
    }
    fn consumer_names(&mut self) -> seqstore_commands::Result<Vec<String>> {
        self.0.consumer_names().map_err(backend)
    }
    fn recovery_report(&self) -> RecoveryReport {
        self.0.recovery_report().clone()
    }
    fn close(self) -> seqstore_commands::Result<()> {
        self.0.close().map_err(backend)
    }
}
