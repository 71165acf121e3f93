//! The store's lock on a real directory, shared by both backends' [`Fs::lock`].
//!
//! - **Natively** the lock is an OS lock (`flock`, through `File::try_lock`) on the file
//!   `LOCK` in the store root, which the kernel releases when its holder exits or is killed.
//!   The holder writes `pid N` into the file (for the message of whoever finds it held) and
//!   empties it again when it lets go; the file itself stays.
//! - **Under WASI** there are no file locks. The holder creates the marker `LOCK.wasi`
//!   exclusively (`O_EXCL`, atomic everywhere) and removes it when it lets go; a marker left
//!   by a guest that died must be removed by hand, and the refusal says so.
//! - **Between the two**, each side publishes its claim before it looks at the other's: a
//!   native holder writes its pid into `LOCK`, then looks for `LOCK.wasi`; a WASI opener
//!   creates `LOCK.wasi`, then reads `LOCK`. Whichever looks second sees the other and backs
//!   off, so two never go on together (both may back off, and try again). A pid left in
//!   `LOCK` by a native holder that was killed stops WASI openers until the next native open
//!   and close empties it; that refusal says so too.
//!
//! [`Fs::lock`]: seqstore_core::Fs::lock

/// The name of the WASI marker beside the lock file `name`.
pub(crate) fn marker_name(name: &str) -> String {
    format!("{name}.wasi")
}

/// What a native holder writes into the lock file.
#[cfg(not(target_os = "wasi"))]
pub(crate) fn native_claim() -> String {
    format!("pid {}\n", std::process::id())
}

/// The pid a lock file's contents claim, if they are a native holder's claim.
pub(crate) fn parse_claim(contents: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(contents).ok()?;
    text.trim().strip_prefix("pid ")?.parse().ok()
}

/// The refusal's words for a WASI marker that is in the way.
pub(crate) fn wasi_holder(marker_path: &str, contents: &[u8]) -> String {
    let who = String::from_utf8_lossy(contents);
    let who = who.trim();
    let who = if who.is_empty() {
        "a WASI process"
    } else {
        who
    };
    format!("held by {who}, which takes no OS lock; if no such process runs, remove {marker_path}")
}

/// The refusal's words, under WASI, for a native claim found in the lock file.
#[cfg(target_os = "wasi")]
pub(crate) fn native_holder_from_wasi(lock_path: &str) -> String {
    format!(
        "held by a native process; if it no longer runs, open the store once natively \
         (e.g. `seqstore state`), which clears {lock_path}"
    )
}
