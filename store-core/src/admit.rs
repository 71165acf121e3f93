//! The admission check of an append: what every way in checks of a message before anything
//! is written, in one order, so that the same message gets the same error whichever way it
//! came (`Store::append`, the encoded and batched paths, the ttl and raw appends, and the wasm
//! host's queue, which predicts the guest's answer from this same check).
//!
//! Order: the subject (unless the store already holds the name: it was validated when first
//! stored), the payload size, the header size; then the store's own state (closed, poisoned,
//! the limits under `Discard::New`, which only the store knows); then the sequence space.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::record;
use crate::subject;

// A message within the bounds `Config::validate` allows always fits a record, so no way in
// needs a record-size check of its own (the encoder asserts it).
const _: () = assert!(
    crate::config::MAX_PAYLOAD_LIMIT as usize
        + crate::config::MAX_HEADERS_LIMIT as usize
        + subject::MAX_SUBJECT_LEN
        + record::REC_OVERHEAD
        + 8
        <= record::HARD_MAX_RECORD
);

/// The bounds an append is checked against, taken from a store's [`Config`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    max_payload: u32,
    max_headers: u32,
}

impl Admission {
    /// The bounds of `cfg`.
    #[inline(always)]
    pub fn new(cfg: &Config) -> Self {
        Admission {
            max_payload: cfg.max_payload,
            max_headers: cfg.max_headers,
        }
    }

    /// The checks of the message itself, in order: `subject` (skipped when `subject_known`,
    /// i.e. the store holds that name), then the payload's and the headers' sizes.
    #[inline(always)]
    pub fn message(
        &self,
        subject: &str,
        subject_known: bool,
        headers: usize,
        payload: usize,
    ) -> Result<()> {
        if !subject_known {
            subject::validate_subject(subject)?;
        }
        self.sizes(headers, payload)
    }

    /// The size checks alone (`TooLarge`), for a caller whose subject is known.
    #[inline(always)]
    pub fn sizes(&self, headers: usize, payload: usize) -> Result<()> {
        within("payload", payload, self.max_payload)?;
        within("headers", headers, self.max_headers)
    }

    /// The last check: the sequence after `last_seq`, if the sequence space has room for it.
    #[inline(always)]
    pub fn next_seq(last_seq: u64) -> Result<u64> {
        if last_seq >= record::MAX_SEQ {
            return Err(Error::LimitExceeded {
                limit: "sequence space",
            });
        }
        Ok(last_seq + 1)
    }
}

/// `TooLarge` when `len` passes `max`.
#[inline(always)]
fn within(what: &'static str, len: usize, max: u32) -> Result<()> {
    if len > max as usize {
        return Err(Error::TooLarge {
            what,
            len: len as u64,
            max: u64::from(max),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_bounds() {
        let cfg = Config {
            max_payload: 10,
            max_headers: 4,
            ..Config::default()
        };
        let a = Admission::new(&cfg);
        assert!(a.message("a.b", false, 4, 10).is_ok());
        // the subject is checked first, then the payload, then the headers
        let e = a.message("a..b", false, 5, 11).unwrap_err();
        assert!(matches!(e, Error::InvalidSubject { .. }), "{e}");
        assert!(
            a.message("a..b", true, 0, 0).is_ok(),
            "a known name is not re-checked"
        );
        let e = a.message("a.b", false, 5, 11).unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "payload",
                    ..
                }
            ),
            "{e}"
        );
        let e = a.message("a.b", false, 5, 10).unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "headers",
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(Admission::next_seq(7).unwrap(), 8);
        assert!(matches!(
            Admission::next_seq(record::MAX_SEQ),
            Err(Error::LimitExceeded { .. })
        ));
    }
}
