//! The store commands (the `seqstore-commands` crate runs them): natively, or with `--guest`
//! in the wasm guest through wasm-host, and their output as text or `--json`.

use seqstore_commands::{
    execute, is_locked, prepare_dir, report, retry_locked, run_and_close, Backend, Error, Output,
    StoreCmd, EXIT_FAILED,
};
use seqstore_core::{ConsumerConfig, ConsumerState, RecoveryReport, StoredMsg, StreamState};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

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

/// The wasm guest as a [`Backend`] of the shared commands.
struct Guest(seqstore_wasm::GuestStore);

fn backend(e: seqstore_wasm::Error) -> Error {
    Error::Backend(Box::new(e))
}

/// Forwards to `GuestStore`'s method of the same name.
macro_rules! forward {
    ($( fn $name:ident(&mut self $(, $a:ident: $t:ty)*) -> $r:ty; )*) => {
        $( fn $name(&mut self $(, $a: $t)*) -> seqstore_commands::Result<$r> {
            self.0.$name($($a),*).map_err(backend)
        } )*
    };
}

impl Backend for Guest {
    fn append(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Option<Duration>,
    ) -> seqstore_commands::Result<u64> {
        match ttl {
            None => self.0.append(subject, headers, payload),
            Some(t) => self.0.append_with_ttl(subject, headers, payload, t),
        }
        .map_err(backend)
    }
    seqstore_commands::for_each_forwarded!(forward);
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
