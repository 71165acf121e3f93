//! Empty: this crate exists for its dependencies' features (see its Cargo.toml). Its one test
//! checks that they are enough.
#![forbid(unsafe_code)]

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::process::Command;

    /// Each resolved package with its features, one `name version features` line each, as
    /// `cargo tree` prints them for `args`.
    fn resolved(args: &[&str]) -> BTreeSet<String> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "tree",
                "--quiet",
                "--offline",
                "--prefix",
                "none",
                "--format",
                "{p} {f}",
            ])
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run cargo tree");
        assert!(
            out.status.success(),
            "cargo tree {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(|l| l.trim_end_matches(" (*)").to_string())
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// The crash lab's build (`cargo run -p seqstore --features ablation`) resolves every
    /// package it shares with the tests' build (`cargo test --workspace`) with the tests'
    /// features: otherwise that package and all above it compile again for the tests.
    #[test]
    fn the_lab_build_is_the_tests_build() {
        let lab = resolved(&[
            "-p",
            "seqstore",
            "--features",
            "ablation",
            "-e",
            "normal,build",
        ]);
        let tests = resolved(&["--workspace", "-e", "normal,build,dev"]);
        let differ: Vec<&String> = lab.difference(&tests).collect();
        assert!(
            differ.is_empty(),
            "the crash lab's build resolves these packages with other features than the tests' \
             build does; add the tests' features of each to lab-features/Cargo.toml:\n{}",
            differ
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
