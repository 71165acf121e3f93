//! The syntax of `strace -f -y` output: one record per line, `PID name(args) = result`, a call
//! split across lines as `<unfinished ...>` / `<... name resumed>`, and the argument values
//! (strings with C escapes, `[...]` arrays, `{...}` structs, atoms with `<path>` annotations).

use std::fmt;

/// One argument value as strace prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    /// A quoted string, unescaped; `truncated` when strace printed `"..."...` (more bytes than
    /// `-s` allows).
    Str { bytes: Vec<u8>, truncated: bool },
    /// Anything else up to the next delimiter (a number, flags, `NULL`, `AT_FDCWD`), with the
    /// `<...>` annotation `-y` adds to descriptors.
    Atom { text: String, ann: Option<String> },
    /// `[a, b]`
    List(Vec<Val>),
    /// `{key=value, ...}`
    Struct(Vec<(Option<String>, Val)>),
}

impl Val {
    pub(crate) fn atom(&self) -> Option<&str> {
        match self {
            Val::Atom { text, .. } => Some(text),
            _ => None,
        }
    }

    pub(crate) fn ann(&self) -> Option<&str> {
        match self {
            Val::Atom { ann, .. } => ann.as_deref(),
            _ => None,
        }
    }

    /// The value as an integer: decimal, `0x` hex or `0` octal, optionally negative.
    pub(crate) fn int(&self) -> Option<i64> {
        parse_int(self.atom()?)
    }

    /// A struct field by name.
    pub(crate) fn field(&self, name: &str) -> Option<&Val> {
        match self {
            Val::Struct(fs) => fs
                .iter()
                .find(|(k, _)| k.as_deref() == Some(name))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

pub(crate) fn parse_int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = if let Some(h) = s.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        i64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// A call's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ret {
    /// `= N` (with the annotation of a returned descriptor, `= 3</path>`).
    Ok { value: i64, ann: Option<String> },
    /// `= -1 ENOENT (...)`
    Err(String),
    /// `= ?`: the process died in the call; whether it took effect is unknown.
    Unknown,
}

/// One syntactic line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A whole call; `rest` is everything after `name(`.
    Call {
        pid: u32,
        name: &'a str,
        rest: &'a str,
    },
    /// The first half of a call; `head` is what follows `name(` before ` <unfinished ...>`.
    Unfinished {
        pid: u32,
        name: &'a str,
        head: &'a str,
    },
    /// The second half; `tail` follows `<... name resumed>`.
    Resumed {
        pid: u32,
        name: &'a str,
        tail: &'a str,
    },
    /// Signals (`--- SIG... ---`), exits (`+++ ... +++`), blank lines.
    Other,
}

/// Why a line did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SyntaxError(pub(crate) String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad<T>(msg: impl Into<String>) -> Result<T, SyntaxError> {
    Err(SyntaxError(msg.into()))
}

const UNFINISHED: &str = " <unfinished ...>";

/// Splits a line into pid, call name and the rest.
pub(crate) fn line(l: &str) -> Result<Line<'_>, SyntaxError> {
    let l = l.trim_end_matches(['\n', '\r']);
    let (pid, body) = match l.split_once(' ') {
        Some((p, b)) if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) => {
            (p.parse::<u32>().map_err(|e| SyntaxError(e.to_string()))?, b)
        }
        _ => (0, l),
    };
    let body = body.trim_start();
    if body.is_empty() || body.starts_with("---") || body.starts_with("+++") {
        return Ok(Line::Other);
    }
    if let Some(r) = body.strip_prefix("<... ") {
        let Some((name, tail)) = r.split_once(" resumed>") else {
            return bad("`<...` without ` resumed>`");
        };
        return Ok(Line::Resumed { pid, name, tail });
    }
    let Some(open) = body.find('(') else {
        return bad("no `(` after the call name");
    };
    let name = &body[..open];
    // `???` is strace's name for a call it could not identify (a process killed on entry)
    let word = !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
    if !word && name != "???" {
        return bad(format!("not a call name: {name:?}"));
    }
    let after = &body[open + 1..];
    match after.strip_suffix(UNFINISHED) {
        Some(head) => Ok(Line::Unfinished { pid, name, head }),
        None => Ok(Line::Call {
            pid,
            name,
            rest: after,
        }),
    }
}

/// A cursor over the argument text.
struct Cur<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn starts(&self, p: &str) -> bool {
        self.s[self.i..].starts_with(p.as_bytes())
    }
    fn skip_ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }
    fn eat(&mut self, p: &str) -> bool {
        if self.starts(p) {
            self.i += p.len();
            true
        } else {
            false
        }
    }
    fn text(&self, from: usize) -> String {
        String::from_utf8_lossy(&self.s[from..self.i]).into_owned()
    }
}

/// Parses `args) = result` (the text after `name(`) into the arguments and the result.
pub(crate) fn call(rest: &str) -> Result<(Vec<Val>, Ret), SyntaxError> {
    let mut c = Cur {
        s: rest.as_bytes(),
        i: 0,
    };
    let args = seq(&mut c, b')')?;
    c.skip_ws();
    if !c.eat("= ") && !c.eat("=") {
        return bad("no `= result` after the arguments");
    }
    c.skip_ws();
    Ok((args.into_iter().map(|(_, v)| v).collect(), ret(&mut c)?))
}

fn ret(c: &mut Cur<'_>) -> Result<Ret, SyntaxError> {
    if c.eat("?") {
        return Ok(Ret::Unknown);
    }
    let from = c.i;
    while c
        .peek()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        c.i += 1;
    }
    let num = c.text(from);
    let Some(value) = parse_int(&num) else {
        return bad(format!("result is not a number: {num:?}"));
    };
    if value < 0 {
        c.skip_ws();
        let from = c.i;
        while c.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
            c.i += 1;
        }
        let errno = c.text(from);
        return Ok(Ret::Err(if errno.is_empty() {
            format!("{value}")
        } else {
            errno
        }));
    }
    let ann = if c.peek() == Some(b'<') {
        Some(annotation(c)?)
    } else {
        None
    };
    Ok(Ret::Ok { value, ann })
}

/// Values separated by `, ` up to `close` (consumed). Struct members may be `key=value`;
/// `in => out` pairs keep the value printed first.
fn seq(c: &mut Cur<'_>, close: u8) -> Result<Vec<(Option<String>, Val)>, SyntaxError> {
    let mut out = Vec::new();
    c.skip_ws();
    if c.peek() == Some(close) {
        c.i += 1;
        return Ok(out);
    }
    loop {
        c.skip_ws();
        let key = key(c);
        let v = value(c)?;
        c.skip_ws();
        if c.eat("=> ") {
            value(c)?;
            c.skip_ws();
        }
        out.push((key, v));
        match c.peek() {
            Some(b',') => c.i += 1,
            Some(b) if b == close => {
                c.i += 1;
                return Ok(out);
            }
            Some(b) => return bad(format!("unexpected {:?} at byte {}", b as char, c.i)),
            None => return bad("the line ends inside the arguments"),
        }
    }
}

/// `ident=` (not `==`) before a value: a struct member's or named argument's name.
fn key(c: &mut Cur<'_>) -> Option<String> {
    let from = c.i;
    let mut j = c.i;
    while j < c.s.len() && (c.s[j].is_ascii_alphanumeric() || c.s[j] == b'_') {
        j += 1;
    }
    if j > from && c.s.get(j) == Some(&b'=') && c.s.get(j + 1) != Some(&b'=') {
        c.i = j + 1;
        return Some(String::from_utf8_lossy(&c.s[from..j]).into_owned());
    }
    None
}

fn value(c: &mut Cur<'_>) -> Result<Val, SyntaxError> {
    c.skip_ws();
    if c.eat("/*") {
        // a comment such as `/* 3 entries */`: skip it, the value follows (or the list ends)
        while !c.starts("*/") {
            if c.peek().is_none() {
                return bad("unterminated comment");
            }
            c.i += 1;
        }
        c.i += 2;
        c.skip_ws();
    }
    match c.peek() {
        Some(b'"') => string(c),
        Some(b'[') => {
            c.i += 1;
            Ok(Val::List(
                seq(c, b']')?.into_iter().map(|(_, v)| v).collect(),
            ))
        }
        Some(b'{') => {
            c.i += 1;
            Ok(Val::Struct(seq(c, b'}')?))
        }
        Some(_) => atom(c),
        None => bad("the line ends where a value should be"),
    }
}

fn string(c: &mut Cur<'_>) -> Result<Val, SyntaxError> {
    c.i += 1;
    let mut bytes = Vec::new();
    loop {
        match c.peek() {
            None => return bad("unterminated string"),
            Some(b'"') => {
                c.i += 1;
                break;
            }
            Some(b'\\') => {
                c.i += 1;
                bytes.push(escape(c)?);
            }
            Some(b) => {
                bytes.push(b);
                c.i += 1;
            }
        }
    }
    let truncated = c.eat("...");
    Ok(Val::Str { bytes, truncated })
}

/// One C escape after the backslash: `\n \t \r \v \f \a \b \e \\ \" \'`, `\xHH`, `\NNN` (octal).
fn escape(c: &mut Cur<'_>) -> Result<u8, SyntaxError> {
    let Some(b) = c.peek() else {
        return bad("a string ends in a backslash");
    };
    c.i += 1;
    Ok(match b {
        b'n' => b'\n',
        b't' => b'\t',
        b'r' => b'\r',
        b'v' => 0x0b,
        b'f' => 0x0c,
        b'a' => 0x07,
        b'b' => 0x08,
        b'e' => 0x1b,
        b'\\' | b'"' | b'\'' | b'?' => b,
        b'x' => {
            let from = c.i;
            while c.i < from + 2 && c.peek().is_some_and(|d| d.is_ascii_hexdigit()) {
                c.i += 1;
            }
            u8::from_str_radix(&c.text(from), 16)
                .map_err(|_| SyntaxError("`\\x` without hex digits".into()))?
        }
        b'0'..=b'7' => {
            let from = c.i - 1;
            while c.i < from + 3 && c.peek().is_some_and(|d| (b'0'..=b'7').contains(&d)) {
                c.i += 1;
            }
            let v = u32::from_str_radix(&c.text(from), 8).unwrap_or(256);
            u8::try_from(v).map_err(|_| SyntaxError("octal escape above \\377".into()))?
        }
        other => return bad(format!("unknown escape \\{}", other as char)),
    })
}

/// An atom: up to `,` `)` `]` `}` at nesting depth 0 (atoms such as `htons(4222)` nest
/// parentheses), then an optional `<annotation>`.
fn atom(c: &mut Cur<'_>) -> Result<Val, SyntaxError> {
    let from = c.i;
    let mut depth = 0u32;
    while let Some(b) = c.peek() {
        match b {
            b'(' => depth += 1,
            b')' if depth > 0 => depth -= 1,
            b',' | b')' | b']' | b'}' if depth == 0 => break,
            b'<' if depth == 0 => break,
            b' ' if depth == 0 && c.starts(" =>") => break,
            b'"' => {
                string(c)?;
                continue;
            }
            _ => {}
        }
        c.i += 1;
    }
    let text = c.text(from).trim_end().to_string();
    let ann = if c.peek() == Some(b'<') {
        Some(annotation(c)?)
    } else {
        None
    };
    Ok(Val::Atom { text, ann })
}

/// `<...>` after a descriptor: its path (or socket description). It ends at a `>` followed by
/// a delimiter, since socket annotations contain `->`.
fn annotation(c: &mut Cur<'_>) -> Result<String, SyntaxError> {
    c.i += 1;
    let from = c.i;
    loop {
        match c.peek() {
            None => return bad("unterminated `<annotation>`"),
            Some(b'>') => {
                let next = c.s.get(c.i + 1).copied();
                if matches!(next, None | Some(b',' | b')' | b']' | b'}' | b' ' | b'>')) {
                    let text = c.text(from);
                    c.i += 1;
                    return Ok(text);
                }
            }
            _ => {}
        }
        c.i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(b: &[u8]) -> Val {
        Val::Str {
            bytes: b.to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn lines_split_into_pid_name_rest() {
        assert_eq!(
            line("123 write(3</d/f>, \"ab\", 2) = 2").unwrap(),
            Line::Call {
                pid: 123,
                name: "write",
                rest: "3</d/f>, \"ab\", 2) = 2"
            }
        );
        assert_eq!(
            line("7 read(3,  <unfinished ...>").unwrap(),
            Line::Unfinished {
                pid: 7,
                name: "read",
                head: "3, "
            }
        );
        assert_eq!(
            line("7 <... read resumed>\"x\", 9) = 1").unwrap(),
            Line::Resumed {
                pid: 7,
                name: "read",
                tail: "\"x\", 9) = 1"
            }
        );
        assert_eq!(line("7 +++ killed by SIGKILL +++").unwrap(), Line::Other);
        assert!(matches!(
            line("7 ???( <unfinished ...>").unwrap(),
            Line::Unfinished { name: "???", .. }
        ));
        assert_eq!(
            line("7 --- SIGCHLD {si_signo=SIGCHLD} ---").unwrap(),
            Line::Other
        );
        assert!(line("7 garbage").is_err());
    }

    #[test]
    fn arguments_and_results() {
        let (a, r) = call("3</d/f>, \"a\\n\\0\\x41\\101\", 5) = 5").unwrap();
        assert_eq!(a[1], s(b"a\n\0AA"));
        assert_eq!(a[0].ann(), Some("/d/f"));
        assert_eq!(a[0].int(), Some(3));
        assert_eq!(
            r,
            Ret::Ok {
                value: 5,
                ann: None
            }
        );
        let (_, r) = call("AT_FDCWD, \"/x\", O_RDONLY) = -1 ENOENT (No such file)").unwrap();
        assert_eq!(r, Ret::Err("ENOENT".into()));
        let (_, r) = call("AT_FDCWD</t>, \"/x\", O_RDWR|O_CREAT, 0644) = 9</x>").unwrap();
        assert_eq!(
            r,
            Ret::Ok {
                value: 9,
                ann: Some("/x".into())
            }
        );
        let (a, _) =
            call("3, [{iov_base=\"ab\", iov_len=2}, {iov_base=\"c\", iov_len=1}], 2) = 3").unwrap();
        let Val::List(iov) = &a[1] else {
            panic!("{a:?}")
        };
        assert_eq!(iov[1].field("iov_base"), Some(&s(b"c")));
        let (a, _) =
            call("{flags=CLONE_VM|CLONE_FILES, exit_signal=0} => {parent_tid=[5]}, 88) = 5")
                .unwrap();
        assert_eq!(
            a[0].field("flags").and_then(Val::atom),
            Some("CLONE_VM|CLONE_FILES")
        );
        let (a, _) = call("7<TCP:[1.2.3.4:5->6.7.8.9:10]>, \"x\"..., 9) = 9").unwrap();
        assert_eq!(a[0].ann(), Some("TCP:[1.2.3.4:5->6.7.8.9:10]"));
        assert!(matches!(
            a[1],
            Val::Str {
                truncated: true,
                ..
            }
        ));
        assert_eq!(call("0) = ?").unwrap().1, Ret::Unknown);
    }

    #[test]
    fn malformed_arguments_are_errors() {
        for bad in [
            "\"abc",
            "3, \"a\\",
            "3, \"\\q\"",
            "3",
            "3) 4",
            "3) = x",
            "[1, 2) = 0",
            "3<abc) = 0",
            "/* x",
        ] {
            assert!(call(bad).is_err(), "{bad:?} parsed");
        }
    }
}
