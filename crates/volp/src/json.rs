//! A strict RFC 8259 JSON parser for VOLP headers.
//!
//! serde_json is not used for the header because VOLP needs things it does not give: duplicate
//! keys must be refused (serde_json keeps the last one silently), every value needs its byte
//! offset for findings, and numbers too large for an f64 (`1e400`) are valid JSON that must
//! reach the scale/offset rules instead of failing the whole header.

use serde_json::{Map, Number, Value};

/// A JSON value with the byte offset (relative to the start of the text) where it begins.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Byte offset of the value's first character in the text.
    pub offset: usize,
    /// The value.
    pub value: JValue,
}

/// A JSON value, keeping what a header's rules need that serde_json's `Value` loses.
#[derive(Debug, Clone, PartialEq)]
pub enum JValue {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number: its exact source text and the nearest f64 (infinite when out of range).
    Number {
        /// The number as written (integrality is decided from these digits).
        raw: String,
        /// The nearest f64 (infinite beyond the f64 range).
        value: f64,
    },
    /// A string, unescaped.
    String(String),
    /// An array's items in order.
    Array(Vec<Node>),
    /// Members in source order; keys are unique (duplicates are a parse error).
    Object(Vec<(String, Node)>),
}

/// Why the text is not acceptable JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// Not RFC 8259 JSON (or bytes after the value).
    Syntax,
    /// A key that appears twice in one object (after unescaping).
    DuplicateKey(String),
    /// Nested deeper than the limit.
    TooDeep,
}

/// Why and where the text is not acceptable JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// What is wrong.
    pub kind: JsonErrorKind,
    /// Byte offset in the text.
    pub offset: usize,
    /// A sentence for people.
    pub message: String,
}

impl JValue {
    /// The value's JSON type with an article, for messages (`a string`, `null`).
    pub fn type_name(&self) -> &'static str {
        match self {
            JValue::Null => "null",
            JValue::Bool(_) => "a boolean",
            JValue::Number { .. } => "a number",
            JValue::String(_) => "a string",
            JValue::Array(_) => "an array",
            JValue::Object(_) => "an object",
        }
    }

    /// The value as compact JSON text, numbers exactly as written (`1e400`, 30-digit integers),
    /// strings re-escaped: what a VOLP writer copies to carry a key it does not interpret.
    pub fn to_json_text(&self) -> String {
        let mut out = String::new();
        self.write_json_text(&mut out);
        out
    }

    fn write_json_text(&self, out: &mut String) {
        let string = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        match self {
            JValue::Null => out.push_str("null"),
            JValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            JValue::Number { raw, .. } => out.push_str(raw),
            JValue::String(s) => out.push_str(&string(s)),
            JValue::Array(items) => {
                out.push('[');
                for (i, n) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    n.value.write_json_text(out);
                }
                out.push(']');
            }
            JValue::Object(members) => {
                out.push('{');
                for (i, (k, n)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&string(k));
                    out.push(':');
                    n.value.write_json_text(out);
                }
                out.push('}');
            }
        }
    }

    /// The same value as serde_json's, for reports. Integers stay integers; an integer beyond
    /// 64 bits (`123456789012345678901234567890`) is kept as a string of its digits, as FOLD's
    /// metadata does (an f64 would silently round it: docs/cli.md, "Numbers in JSON"), and so
    /// is a number beyond the f64 range (`1e400`: serde_json cannot hold it).
    pub fn to_serde(&self) -> Value {
        match self {
            JValue::Null => Value::Null,
            JValue::Bool(b) => Value::Bool(*b),
            JValue::Number { raw, value } => {
                if let Ok(i) = raw.parse::<i64>() {
                    Value::Number(i.into())
                } else if let Ok(u) = raw.parse::<u64>() {
                    Value::Number(u.into())
                } else if !raw.contains(['.', 'e', 'E']) {
                    Value::String(raw.clone())
                } else {
                    match Number::from_f64(*value) {
                        Some(n) => Value::Number(n),
                        None => Value::String(raw.clone()),
                    }
                }
            }
            JValue::String(s) => Value::String(s.clone()),
            JValue::Array(items) => Value::Array(items.iter().map(|n| n.value.to_serde()).collect()),
            JValue::Object(members) => {
                let mut m = Map::new();
                for (k, v) in members {
                    m.insert(k.clone(), v.value.to_serde());
                }
                Value::Object(m)
            }
        }
    }
}

/// Parse exactly one JSON value, with optional JSON whitespace around it and nothing else.
pub fn parse(text: &str, max_depth: u32) -> Result<Node, JsonError> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
        max_depth,
    };
    p.ws();
    let node = p.value(0)?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.err_at(p.pos, "unexpected bytes after the JSON value"));
    }
    Ok(node)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    max_depth: u32,
}

impl Parser<'_> {
    fn err_at(&self, offset: usize, what: &str) -> JsonError {
        let found = match self.s.get(offset) {
            Some(b) => format!("byte 0x{b:02x}"),
            None => "end of header".to_string(),
        };
        JsonError {
            kind: JsonErrorKind::Syntax,
            offset,
            message: format!("{what} (found {found})"),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    /// RFC 8259 whitespace only: space, tab, line feed, carriage return.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8, what: &str) -> Result<(), JsonError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err_at(self.pos, what))
        }
    }

    fn value(&mut self, depth: u32) -> Result<Node, JsonError> {
        let offset = self.pos;
        let value = match self.peek() {
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => JValue::String(self.string()?),
            Some(b't') => self.literal("true", JValue::Bool(true))?,
            Some(b'f') => self.literal("false", JValue::Bool(false))?,
            Some(b'n') => self.literal("null", JValue::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            _ => return Err(self.err_at(offset, "expected a JSON value")),
        };
        Ok(Node { offset, value })
    }

    fn literal(&mut self, word: &str, v: JValue) -> Result<JValue, JsonError> {
        let end = self.pos.checked_add(word.len()).filter(|&e| e <= self.s.len());
        match end {
            Some(end) if &self.s[self.pos..end] == word.as_bytes() => {
                self.pos = end;
                Ok(v)
            }
            _ => Err(self.err_at(self.pos, "invalid literal")),
        }
    }

    fn enter(&self, depth: u32) -> Result<u32, JsonError> {
        let d = depth + 1;
        if d > self.max_depth {
            return Err(JsonError {
                kind: JsonErrorKind::TooDeep,
                offset: self.pos,
                message: format!("JSON nesting deeper than {} levels", self.max_depth),
            });
        }
        Ok(d)
    }

    fn object(&mut self, depth: u32) -> Result<JValue, JsonError> {
        let depth = self.enter(depth)?;
        self.pos += 1; // '{'
        let mut members: Vec<(String, Node)> = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(JValue::Object(members));
        }
        loop {
            self.ws();
            let key_at = self.pos;
            if self.peek() != Some(b'"') {
                return Err(self.err_at(key_at, "expected a string key"));
            }
            let key = self.string()?;
            // Keys are compared after unescaping: "a" and "\u0061" are the same name.
            if members.iter().any(|(k, _)| *k == key) {
                return Err(JsonError {
                    kind: JsonErrorKind::DuplicateKey(key.clone()),
                    offset: key_at,
                    message: format!("duplicate key \"{}\" in a JSON object", key.escape_debug()),
                });
            }
            self.ws();
            self.expect(b':', "expected ':' after an object key")?;
            self.ws();
            let v = self.value(depth)?;
            members.push((key, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(JValue::Object(members));
                }
                _ => return Err(self.err_at(self.pos, "expected ',' or '}' in an object")),
            }
        }
    }

    fn array(&mut self, depth: u32) -> Result<JValue, JsonError> {
        let depth = self.enter(depth)?;
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(JValue::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(JValue::Array(items));
                }
                _ => return Err(self.err_at(self.pos, "expected ',' or ']' in an array")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` and nothing looser
    /// (no `NaN`, `Infinity`, `+1`, `.5`, `01`, `1.`).
    fn number(&mut self) -> Result<JValue, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.err_at(self.pos, "leading zeros are not allowed in JSON numbers"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err_at(self.pos, "expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.err_at(self.pos, "expected a digit after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err_at(self.pos, "expected a digit in the exponent"));
            }
        }
        // The scanned bytes are ASCII, so this cannot fail; stay panic-free anyway.
        let raw = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("0").to_string();
        // Rust's parser is correctly rounded and yields +-inf beyond the f64 range.
        let value = raw.parse::<f64>().unwrap_or(f64::NAN);
        Ok(JValue::Number { raw, value })
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(self.err_at(self.pos, "expected 4 hex digits after \\u")),
            };
            v = (v << 4) | d as u16;
            self.pos += 1;
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            // Copy a run of plain bytes at once (the text is valid UTF-8 already).
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            if self.pos > run_start {
                match std::str::from_utf8(&self.s[run_start..self.pos]) {
                    Ok(t) => out.push_str(t),
                    Err(_) => return Err(self.err_at(run_start, "invalid UTF-8 in a string")),
                }
            }
            match self.peek() {
                None => return Err(self.err_at(self.pos, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let esc_at = self.pos;
                    let c = match self.peek() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) {
                                // A high surrogate must be followed by an escaped low one.
                                if self.s.get(self.pos) != Some(&b'\\') || self.s.get(self.pos + 1) != Some(&b'u') {
                                    return Err(self.err_at(esc_at, "unpaired surrogate in \\u escape"));
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err_at(esc_at, "unpaired surrogate in \\u escape"));
                                }
                                0x10000 + (((hi as u32) - 0xD800) << 10) + ((lo as u32) - 0xDC00)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return Err(self.err_at(esc_at, "unpaired surrogate in \\u escape"));
                            } else {
                                hi as u32
                            };
                            match char::from_u32(cp) {
                                Some(c) => out.push(c),
                                None => return Err(self.err_at(esc_at, "invalid \\u escape")),
                            }
                            continue;
                        }
                        _ => return Err(self.err_at(esc_at, "invalid escape in a string")),
                    };
                    self.pos += 1;
                    out.push(c);
                }
                Some(_) => return Err(self.err_at(self.pos, "unescaped control character in a string")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> JValue {
        parse(s, 64).unwrap_or_else(|e| panic!("{s}: {e:?}")).value
    }
    fn bad(s: &str) -> JsonError {
        parse(s, 64).expect_err(s)
    }

    #[test]
    fn accepts_rfc8259() {
        assert_eq!(ok(" \t\r\n{}\n "), JValue::Object(vec![]));
        assert!(matches!(ok("[1, -0, 0.5, 1e3, 2E-2, 1e400]"), JValue::Array(v) if v.len() == 6));
        assert_eq!(ok(r#""a\u00e9\ud83d\ude00\n""#), JValue::String("aé😀\n".into()));
        match ok("1e400") {
            JValue::Number { value, .. } => assert!(value.is_infinite()),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn refuses_extensions_and_duplicates() {
        for s in [
            "NaN",
            "Infinity",
            "-Infinity",
            "+1",
            ".5",
            "01",
            "1.",
            "1e",
            "[1,]",
            "{\"a\":1,}",
            "'a'",
            "{a:1}",
            "\"\t\"",
            "{} x",
            "{}\0",
            "\"\\ud800\"",
            "\"\\x\"",
            "",
        ] {
            assert_eq!(bad(s).kind, JsonErrorKind::Syntax, "{s:?}");
        }
        let e = bad(r#"{"a":1,"b":{"c":1,"c":2}}"#);
        assert_eq!(e.kind, JsonErrorKind::DuplicateKey("c".into()));
        assert_eq!(e.offset, 18);
        assert!(matches!(
            bad(r#"{"a":1,"\u0061":2}"#).kind,
            JsonErrorKind::DuplicateKey(_)
        ));
        assert_eq!(parse(&"[".repeat(100), 64).unwrap_err().kind, JsonErrorKind::TooDeep);
    }
}
