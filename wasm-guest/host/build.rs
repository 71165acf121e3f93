//! Builds the seqstore guest for `wasm32-wasip2` so that a plain `cargo build` / `cargo test`
//! of this crate has the components to embed.
//!
//! A nested `cargo build` of the `seqstore-guest` package (same workspace, same Cargo.lock)
//! runs into a target directory of its own, `<target>/<profile>/wasm-guest-build`: the outer
//! cargo holds the lock of its own target directory for the whole build, so building into that
//! one would deadlock. Two builds, each in its own subdirectory so that they never rebuild each
//! other's artifacts:
//! - `store/`: the `store` component (lib) and the `seqstore-guest` command (bin);
//! - `test-hooks/`: the component and the command again with the `test-hooks` feature, for the
//!   sandbox tests and the crash lab (the command takes an ablation from its environment).
//!
//! The guest is always built with the release profile: it is small, and an optimized guest
//! is what the host's numbers should describe. The artifacts are copied into `OUT_DIR` and
//! their paths handed to the crate as `SEQSTORE_*_WASM` environment variables.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const TARGET: &str = "wasm32-wasip2";
const GUEST_PACKAGE: &str = "seqstore-guest";

fn fail(msg: &str) -> ! {
    // `cargo::error` shows the message as the build's error (one line); stderr keeps the
    // layout; the exit code fails the build.
    let one_line: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    println!("cargo::error={}", one_line.join(" "));
    eprintln!("{msg}");
    exit(1);
}

fn env_path(name: &str) -> PathBuf {
    env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| fail(&format!("seqstore-wasm build script: {name} is not set")))
}

/// Whether the toolchain running this build has a standard library for `wasm32-wasip2` (without
/// it the nested build fails with "can't find crate for `std`").
fn target_installed() -> bool {
    match target_libdir() {
        Some(dir) => std::fs::read_dir(&dir)
            .map(|mut entries| {
                entries.any(|e| {
                    e.map(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
                        .unwrap_or(false)
                })
            })
            .unwrap_or(false),
        None => false,
    }
}

/// Where the toolchain keeps (or would keep) the target's libraries.
fn target_libdir() -> Option<PathBuf> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
    let out = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Installs the target with rustup when it is missing, so that the README's two commands work
/// on a fresh rustup install. The toolchain is the one running this build: rustup's proxy
/// names it in `RUSTUP_TOOLCHAIN` for everything it starts (cargo, and so this script);
/// `rustup` is the one on PATH. Without rustup or without that variable (a toolchain not run
/// through rustup: a distribution's Rust, a linked one), or when the install fails, the build
/// stops with the command to run by hand.
fn ensure_target_installed() {
    if target_installed() {
        return;
    }
    let manual = format!(
        "the {TARGET} target is not installed for this Rust toolchain.\n\
         seqstore-wasm embeds the seqstore guest, which is built for {TARGET}. Install the \
         target with:\n\
         \n    rustup target add {TARGET}\n"
    );
    let Some(toolchain) = env::var_os("RUSTUP_TOOLCHAIN") else {
        fail(&format!(
            "{manual}(not installed automatically: this build does not run through rustup)"
        ));
    };
    let shown = toolchain.to_string_lossy().into_owned();
    println!(
        "cargo::warning=the {TARGET} target was missing from toolchain {shown}: \
         installing it (rustup target add --toolchain {shown} {TARGET})"
    );
    // rustup's output to stderr: this script's stdout is read by cargo as directives.
    let status = Command::new("rustup")
        .args(["target", "add", "--toolchain"])
        .arg(&toolchain)
        .arg(TARGET)
        .stdout(std::io::stderr())
        .status();
    match status {
        Ok(s) if s.success() && target_installed() => {
            println!("cargo::warning=installed the {TARGET} target for {shown}");
        }
        Ok(s) => fail(&format!(
            "{manual}(`rustup target add --toolchain {shown} {TARGET}` did not install it: {s})"
        )),
        Err(e) => fail(&format!("{manual}(cannot run rustup: {e})")),
    }
}

/// One nested `cargo build` of the guest into `target_dir`.
fn cargo_build(workspace: &Path, target_dir: &Path, extra: &[&str]) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .arg("build")
        .args(["--package", GUEST_PACKAGE, "--release", "--target", TARGET])
        .arg("--target-dir")
        .arg(target_dir)
        .args(extra)
        // Flags and wrappers meant for the outer (native) build must not reach the guest:
        // RUSTFLAGS could name native-only flags, and under `cargo clippy` the workspace
        // wrapper would lint (and fingerprint) the guest as a different compiler.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        // The workspace's release profile keeps debug info for native profiling; in the guest
        // it would only make the component larger (wasmtime ignores it).
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        // One optimization unit across store-core, std and the glue: the guest is small, and
        // inlining across crates is most of what makes wasm code fast.
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
    let status = cmd.status().unwrap_or_else(|e| {
        fail(&format!(
            "seqstore-wasm: cannot run cargo for the guest: {e}"
        ))
    });
    if !status.success() {
        fail(&format!(
            "seqstore-wasm: building the seqstore guest for {TARGET} failed ({status}); \
             run `cargo build -p {GUEST_PACKAGE} --target {TARGET} --release` to see why"
        ));
    }
}

fn copy_out(from: &Path, out_dir: &Path, name: &str, env_name: &str) {
    let to = out_dir.join(name);
    if let Err(e) = std::fs::copy(from, &to) {
        fail(&format!(
            "seqstore-wasm: guest artifact {} missing after the build: {e}",
            from.display()
        ));
    }
    println!("cargo::rustc-env={env_name}={}", to.display());
}

fn main() {
    let manifest_dir = env_path("CARGO_MANIFEST_DIR");
    let out_dir = env_path("OUT_DIR");
    let guest_dir = manifest_dir.join("../guest");
    let workspace = manifest_dir.join("../..");

    // The guest's sources and everything it compiles in. Directories are scanned recursively.
    for p in [
        guest_dir.join("src"),
        guest_dir.join("Cargo.toml"),
        manifest_dir.join("../wit"),
        workspace.join("store-core/src"),
        workspace.join("store-core/Cargo.toml"),
        workspace.join("host-fs/src"),
        workspace.join("host-fs/Cargo.toml"),
        workspace.join("Cargo.toml"),
        workspace.join("Cargo.lock"),
    ] {
        println!("cargo::rerun-if-changed={}", p.display());
    }

    // The guest is built with the toolchain's wasm32-wasip2 std: a changed or removed one runs
    // this script again (and a removed one is installed again).
    if let Some(dir) = target_libdir() {
        println!("cargo::rerun-if-changed={}", dir.display());
    }
    ensure_target_installed();

    // OUT_DIR is <target>[/<triple>]/<profile>/build/<pkg>-<hash>/out: keep the guest build
    // next to the profile's own directories, shared by build, test and clippy.
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .unwrap_or_else(|| fail("seqstore-wasm: unexpected OUT_DIR layout"));
    let guest_target = profile_dir.join("wasm-guest-build");

    let store_dir = guest_target.join("store");
    cargo_build(&workspace, &store_dir, &["--lib", "--bin", GUEST_PACKAGE]);
    let hooks_dir = guest_target.join("test-hooks");
    cargo_build(
        &workspace,
        &hooks_dir,
        &["--lib", "--bin", GUEST_PACKAGE, "--features", "test-hooks"],
    );

    let rel = |dir: &Path, file: &str| dir.join(TARGET).join("release").join(file);
    copy_out(
        &rel(&store_dir, "seqstore_component.wasm"),
        &out_dir,
        "seqstore_store.wasm",
        "SEQSTORE_STORE_WASM",
    );
    copy_out(
        &rel(&store_dir, "seqstore-guest.wasm"),
        &out_dir,
        "seqstore-guest.wasm",
        "SEQSTORE_GUEST_CLI_WASM",
    );
    copy_out(
        &rel(&hooks_dir, "seqstore_component.wasm"),
        &out_dir,
        "seqstore_store_test_hooks.wasm",
        "SEQSTORE_TEST_HOOKS_WASM",
    );
    copy_out(
        &rel(&hooks_dir, "seqstore-guest.wasm"),
        &out_dir,
        "seqstore-guest-test-hooks.wasm",
        "SEQSTORE_GUEST_CLI_TEST_HOOKS_WASM",
    );
}
