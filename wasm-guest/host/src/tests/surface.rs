//! The WIT interface against store-core's `StreamStore`: every operation of the trait is a
//! function of the WIT `store` resource (or served by the one named in `SERVED_BY`), and every
//! function of the resource is an operation of the trait (or one of `WIT_ONLY`, each with its
//! reason). A new operation that is missing on either side fails here; one missing from
//! `GuestStore` does not compile.

use seqstore_core::surface::operation_names;

/// Operations the guest serves through a more general WIT call (the host passes one filter
/// as a list of one).
const SERVED_BY: &[(&str, &str)] = &[
    ("prev_matching_multi", "prev-matching"),
    ("filtered_state_multi", "filtered-state"),
    ("num_pending_multi", "num-pending"),
];

/// WIT functions that are not operations of the trait.
const WIT_ONLY: &[(&str, &str)] = &[
    ("open", "the constructor (the builder's open)"),
    (
        "append-packed",
        "append in one buffer: the host's queued appends",
    ),
    (
        "append-encoded",
        "appends as encoded records: the host's queued appends",
    ),
    (
        "append-encoded-one",
        "one encoded record: the host's queued appends",
    ),
    (
        "append-batch",
        "several appends in one call: GuestStore::append_batch",
    ),
    ("get-batch-records", "get_batch as records the host decodes"),
    (
        "is-poisoned",
        "GuestStore::is_poisoned (store-core's is not an operation)",
    ),
];

/// The function names of the WIT `store` resource.
fn wit_store_functions() -> Vec<String> {
    let wit = include_str!("../../../wit/seqstore.wit");
    let start = wit
        .find("resource store {")
        .expect("the WIT has a store resource");
    let body = &wit[start..];
    let end = body.find("\n    }\n").expect("the store resource ends");
    body[..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter_map(|l| {
            l.split_once(": ")
                .filter(|(_, rest)| rest.contains("func("))
        })
        .map(|(name, _)| name.trim_start_matches('%').to_string())
        .collect()
}

fn kebab(op: &str) -> String {
    op.replace('_', "-")
}

#[test]
fn every_operation_is_a_wit_function_and_back() {
    let wit = wit_store_functions();
    assert!(wit.len() > 30, "parsed too few WIT functions: {wit:?}");
    let ops = operation_names();
    let mut missing = Vec::new();
    for op in &ops {
        let served = SERVED_BY.iter().find(|(o, _)| o == op).map(|(_, w)| *w);
        let name = served.map_or_else(|| kebab(op), str::to_string);
        if !wit.contains(&name) {
            missing.push(format!("{op} (WIT `{name}`)"));
        }
    }
    assert!(
        missing.is_empty(),
        "operations without a WIT function: {missing:?}"
    );
    let extra: Vec<&String> = (wit.iter())
        .filter(|w| !ops.iter().any(|op| kebab(op) == **w))
        .filter(|w| !WIT_ONLY.iter().any(|(o, _)| o == w))
        .collect();
    assert!(
        extra.is_empty(),
        "WIT functions that are not operations: {extra:?}"
    );
    for (w, why) in WIT_ONLY {
        assert!(
            wit.iter().any(|f| f == w),
            "WIT_ONLY names `{w}` ({why}), not in the WIT"
        );
    }
}
