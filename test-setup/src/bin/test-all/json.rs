//! Just enough JSON to read cargo's `--message-format=json` lines (test-setup has no
//! dependencies: every test crate builds it).

/// A JSON value; numbers are kept as their text.
#[derive(Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The member `key` of an object; `None` for anything else.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// One JSON text, whole; `None` if it is not valid JSON.
pub fn parse(text: &str) -> Option<Json> {
    let mut p = Parser {
        chars: text.chars().collect(),
        at: 0,
    };
    let value = p.value()?;
    p.space();
    (p.at == p.chars.len()).then_some(value)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    fn space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Option<Json> {
        for w in word.chars() {
            (self.next()? == w).then_some(())?;
        }
        Some(value)
    }

    fn value(&mut self) -> Option<Json> {
        self.space();
        match self.peek()? {
            'n' => self.word("null", Json::Null),
            't' => self.word("true", Json::Bool(true)),
            'f' => self.word("false", Json::Bool(false)),
            '"' => self.string().map(Json::Str),
            '[' => self.array(),
            '{' => self.object(),
            c if c == '-' || c.is_ascii_digit() => Some(self.number()),
            _ => None,
        }
    }

    fn number(&mut self) -> Json {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || "+-.eE".contains(c))
        {
            self.at += 1;
        }
        Json::Num(self.chars[start..self.at].iter().collect())
    }

    fn string(&mut self) -> Option<String> {
        (self.next()? == '"').then_some(())?;
        let mut s = String::new();
        loop {
            match self.next()? {
                '"' => return Some(s),
                '\\' => s.push(self.escape()?),
                c => s.push(c),
            }
        }
    }

    fn escape(&mut self) -> Option<char> {
        Some(match self.next()? {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'u' => {
                let hi = self.hex4()?;
                if (0xD800..0xDC00).contains(&hi) {
                    (self.next()? == '\\' && self.next()? == 'u').then_some(())?;
                    let lo = self.hex4()?;
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo.checked_sub(0xDC00)?))?
                } else {
                    char::from_u32(hi)?
                }
            }
            c => c,
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut v = 0;
        for _ in 0..4 {
            v = v * 16 + self.next()?.to_digit(16)?;
        }
        Some(v)
    }

    fn array(&mut self) -> Option<Json> {
        self.items(']', Self::value).map(Json::Arr)
    }

    fn object(&mut self) -> Option<Json> {
        self.items('}', |p| {
            p.space();
            let key = p.string()?;
            p.space();
            (p.next()? == ':').then_some(())?;
            Some((key, p.value()?))
        })
        .map(Json::Obj)
    }

    /// The items of an array or an object, after its opening bracket: `item`s separated by
    /// commas, up to `close`.
    fn items<T>(
        &mut self,
        close: char,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.next()?;
        let mut items = Vec::new();
        self.space();
        if self.peek()? == close {
            self.next()?;
            return Some(items);
        }
        loop {
            items.push(item(self)?);
            self.space();
            match self.next()? {
                ',' => continue,
                c if c == close => return Some(items),
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, Json};

    #[test]
    fn reads_a_cargo_artifact_line() {
        let line = r#"{"reason":"compiler-artifact","profile":{"test":true,"opt_level":"0"},
            "target":{"kind":["test"],"src_path":"/w/a b/tests/x.rs"},"executable":"/t/x-1",
            "manifest_path":"/w/a b/Cargo.toml","features":[],"fresh":false,"n":-1.5e3}"#;
        let v = parse(line).expect("valid");
        assert_eq!(v.get("executable").and_then(Json::str), Some("/t/x-1"));
        let test = v.get("profile").and_then(|p| p.get("test"));
        assert_eq!(test, Some(&Json::Bool(true)));
        assert_eq!(v.get("n"), Some(&Json::Num("-1.5e3".into())));
        assert_eq!(v.get("missing"), None);
    }

    #[test]
    fn escapes_and_refusals() {
        let v = parse(r#"["a\"\\\n\u00e9\ud83d\ude00", null, {}]"#).expect("valid");
        let Json::Arr(items) = v else {
            panic!("not an array")
        };
        assert_eq!(items[0].str(), Some("a\"\\\né😀"));
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "\"open", "nul", "[1] x"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
