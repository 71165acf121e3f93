#!/usr/bin/env bash
# Fuzz smoke run for CI: installs cargo-fuzz if missing, builds the six targets, runs each for
# FUZZ_SECS seconds (default 10) starting from its seed corpus (new inputs go to a temporary
# directory: the checked-in corpus is not modified), prints the executions per target, and
# exits non-zero if any target crashed (the crashing input is copied to fuzz/artifacts/).
#
# cargo-fuzz passes nightly -Z flags to rustc; RUSTC_BOOTSTRAP=1 lets the stable toolchain
# accept them. --sanitizer none: ASan needs a nightly std; the targets' own checks, Rust's
# bounds and overflow checks (overflow-checks = true in fuzz/Cargo.toml) and a capped allocator
# (fuzz/src/lib.rs) are what detects failures.
#
# cargo-fuzz is installed as a debug build: it only drives cargo, and on 2 cores it installs in
# about 20 s where a release build takes about 40. Then the first build of the targets (about a
# minute), and 6 x FUZZ_SECS (+ ~2 s each) spread over the cores: about 2 minutes in all on 2
# cores with the default (FUZZ_SECS=N runs longer).
set -euo pipefail
cd "$(dirname "$0")"
SECS="${FUZZ_SECS:-10}"
# libFuzzer's own seed: fixed, so that a run is repeatable as far as time allows
SEED="${FUZZ_SEED:-20261206}"
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz"
    cargo install cargo-fuzz --locked --version 0.13.2 --debug
fi
cargo fuzz build --sanitizer none -O
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
# one target, its result on stdout; non-zero if it crashed
run_one() {
    local t="$1"
    mkdir -p "$work/$t"
    if cargo fuzz run "$t" --sanitizer none -O "$work/$t" "corpus/$t" -- \
        -max_total_time="$SECS" -seed="$SEED" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$work/$t-" >"$work/$t.log" 2>&1; then
        runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$' || true)"
        echo "fuzz $t: ok, ${runs:-?} executions in ${SECS}s (FUZZ_SEED=$SEED)"
    else
        echo "fuzz $t: CRASH (FUZZ_SEED=$SEED)"
        grep -E -A12 'panicked|ERROR: libFuzzer' "$work/$t.log" | head -40 || tail -40 "$work/$t.log"
        mkdir -p artifacts
        cp "$work/$t"-* artifacts/ 2>/dev/null || true
        echo "crashing input(s) copied to fuzz/artifacts/; reproduce with:"
        echo "  RUSTC_BOOTSTRAP=1 cargo fuzz run $t --sanitizer none -O fuzz/artifacts/<file>"
        return 1
    fi
}
# as many targets at once as there are cores (each fuzzer is one process on one core)
targets=(record_decode index_decode recover_dir model_ops strace_parse restore_archive)
jobs="$(nproc 2>/dev/null || echo 2)"
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
    pids=()
    for t in "${targets[@]:i:jobs}"; do
        run_one "$t" >"$work/$t.out" 2>&1 &
        pids+=("$!")
    done
    for p in "${pids[@]}"; do
        wait "$p" || status=1
    done
    for t in "${targets[@]:i:jobs}"; do
        cat "$work/$t.out"
    done
done
exit "$status"
