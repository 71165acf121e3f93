//! NATS-style subjects: `.`-separated tokens; filters may use `*` (exactly one token) and `>`
//! (one or more trailing tokens, last position only).

use crate::error::{Error, Result};

/// The longest subject or filter accepted, in bytes. A limit on everything: a subject is stored
/// with a u16 length, and long subjects make every per-subject structure expensive.
pub const MAX_SUBJECT_LEN: usize = 1024;

fn bad(subject: &str, reason: &'static str) -> Error {
    let mut s: String = subject.chars().take(64).collect();
    if s.len() < subject.len() {
        s.push('…');
    }
    Error::InvalidSubject { subject: s, reason }
}

fn check_tokens(subject: &str, allow_wildcards: bool) -> Result<()> {
    if subject.is_empty() {
        return Err(bad(subject, "empty"));
    }
    if subject.len() > MAX_SUBJECT_LEN {
        return Err(bad(subject, "longer than 1024 bytes"));
    }
    let mut tokens = subject.split('.').peekable();
    while let Some(tok) = tokens.next() {
        if tok.is_empty() {
            return Err(bad(subject, "empty token"));
        }
        if tok
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\0')
        {
            return Err(bad(subject, "whitespace or control character"));
        }
        let wild = tok == "*" || tok == ">";
        if !wild && (tok.contains('*') || tok.contains('>')) {
            return Err(bad(subject, "wildcard inside a token"));
        }
        if wild && !allow_wildcards {
            return Err(bad(subject, "wildcards are only allowed in filters"));
        }
        if tok == ">" && tokens.peek().is_some() {
            return Err(bad(subject, "'>' must be the last token"));
        }
    }
    Ok(())
}

/// Checks a subject a message is stored under (no wildcards).
pub fn validate_subject(subject: &str) -> Result<()> {
    check_tokens(subject, false)
}

/// Checks a filter (wildcards allowed).
pub fn validate_filter(filter: &str) -> Result<()> {
    check_tokens(filter, true)
}

/// Whether `subject` (no wildcards) matches `filter` (validated).
pub fn matches(filter: &str, subject: &str) -> bool {
    let mut f = filter.split('.');
    let mut s = subject.split('.');
    loop {
        match (f.next(), s.next()) {
            (None, None) => return true,
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

/// Whether a filter is a literal subject (no wildcards): lookups can then be exact.
pub fn is_literal(filter: &str) -> bool {
    !filter.split('.').any(|t| t == "*" || t == ">")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        for ok in ["a", "a.b", "orders.eu.1", "ü.x"] {
            validate_subject(ok).unwrap();
        }
        for bad in ["", "a..b", ".a", "a.", "a b", "a.*", "a.>", "a*b", "a\nb"] {
            assert!(validate_subject(bad).is_err(), "{bad:?}");
        }
        for ok in ["*", ">", "a.*", "a.>", "*.b.>", "a"] {
            validate_filter(ok).unwrap();
        }
        for bad in [">.a", "a.>.b", "a*", "", "a..*"] {
            assert!(validate_filter(bad).is_err(), "{bad:?}");
        }
        assert!(validate_subject(&"a".repeat(1025)).is_err());
    }

    #[test]
    fn matching() {
        assert!(matches("a.b", "a.b"));
        assert!(!matches("a.b", "a.b.c"));
        assert!(!matches("a.b.c", "a.b"));
        assert!(matches("a.*", "a.b"));
        assert!(!matches("a.*", "a.b.c"));
        assert!(!matches("a.*", "a"));
        assert!(matches("a.>", "a.b.c"));
        assert!(!matches("a.>", "a"));
        assert!(matches(">", "x"));
        assert!(matches("*.b.>", "a.b.c.d"));
        assert!(!matches("*.b.>", "a.c.c"));
        assert!(is_literal("a.b"));
        assert!(!is_literal("a.*"));
    }
}
