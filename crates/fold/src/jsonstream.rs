//! A JSON syntax check fed in pieces: the verdict of [`crate::pjson::parse`] (same rules, same
//! error offset and message) without holding the document or building its value. `validate`
//! runs it on JSON chunks as zstd decodes them, so a chunk that decodes to a gigabyte costs
//! time, not memory.
//!
//! Rules, as Python's `json.loads` in strict mode: UTF-8 text (checked over the whole document
//! first: an invalid byte anywhere is the error, wherever a syntax error lies), one value
//! surrounded by whitespace (space, tab, LF, CR), `NaN`/`Infinity`/`-Infinity` accepted,
//! numbers `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?` with at most 4300 integer digits, strings
//! without raw control characters, escapes `\" \\ \/ \b \f \n \r \t \uXXXX`, nesting at most
//! `max_depth` deep.

use crate::pjson::ParseError;

/// Python's `int` refuses to parse more digits than this.
const MAX_INT_DIGITS: u64 = 4300;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Whitespace, then a value.
    Value,
    /// After `[`: whitespace, then `]` or a value.
    ArrayFirst,
    /// After `{`: whitespace, then `}` or a key.
    ObjectFirst,
    /// After `,` in an object: whitespace, then a key.
    ObjectKey,
    /// After a key: whitespace, then `:`.
    Colon,
    /// After a value: whitespace, then `,`, the closer, or (at top level) the end.
    AfterValue,
    /// Inside a string (a key when `key`).
    Str { key: bool },
    /// After a backslash in a string.
    Escape { key: bool },
    /// The four hex digits of `\u`, starting at `start`: `seen` so far, `bad` if one was not hex.
    Unicode { key: bool, start: u64, seen: u8, bad: bool },
    /// A literal word being matched; on a mismatch the error is at `err_at`.
    Literal {
        word: &'static [u8],
        matched: u8,
        err_at: u64,
    },
    /// After a leading `-`.
    Minus { start: u64 },
    /// After an integer part: `zero` when it is a lone `0` (no more digits may follow).
    Int { start: u64, digits: u64, zero: bool },
    /// After a `.` (at `dot`): a digit must follow for a fraction.
    Dot { start: u64, digits: u64, dot: u64 },
    /// In the fraction digits.
    Fraction { start: u64 },
    /// After `e`/`E` (at `e`), optionally a sign: digits must follow for an exponent.
    Exponent {
        start: u64,
        digits: u64,
        float: bool,
        e: u64,
        signed: bool,
    },
    /// In the exponent digits.
    ExponentDigits,
    /// A syntax error was found (UTF-8 is still checked to the end).
    Failed,
}

/// The incremental checker. Feed the document with [`JsonCheck::feed`], then ask
/// [`JsonCheck::finish`] for the verdict.
#[derive(Debug)]
pub struct JsonCheck {
    max_depth: u32,
    /// Open containers, `[` or `{`, innermost last.
    stack: Vec<u8>,
    state: State,
    pos: u64,
    syntax: Option<ParseError>,
    utf8_error: Option<u64>,
    /// Bytes of a UTF-8 sequence cut by the end of a piece, and where it starts.
    utf8_carry: Vec<u8>,
    utf8_carry_at: u64,
}

fn error(offset: u64, message: &str) -> ParseError {
    ParseError {
        offset: usize::try_from(offset).unwrap_or(usize::MAX),
        message: message.to_string(),
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl JsonCheck {
    /// A checker for a document nested at most `max_depth` deep.
    pub fn new(max_depth: u32) -> JsonCheck {
        JsonCheck {
            max_depth,
            stack: Vec::new(),
            state: State::Value,
            pos: 0,
            syntax: None,
            utf8_error: None,
            utf8_carry: Vec::new(),
            utf8_carry_at: 0,
        }
    }

    /// The next bytes of the document.
    pub fn feed(&mut self, data: &[u8]) {
        self.check_utf8(data);
        let base = self.pos;
        if self.state != State::Failed {
            let mut i = 0;
            while i < data.len() {
                i = self.step(data, i, base);
                if self.state == State::Failed {
                    break;
                }
            }
        }
        self.pos = base + data.len() as u64;
    }

    /// The verdict on everything fed: `Ok` exactly when [`crate::pjson::parse`] accepts the
    /// document, otherwise its error.
    pub fn finish(mut self) -> Result<(), ParseError> {
        if !self.utf8_carry.is_empty() && self.utf8_error.is_none() {
            self.utf8_error = Some(self.utf8_carry_at);
        }
        if let Some(at) = self.utf8_error {
            return Err(error(at, "invalid UTF-8"));
        }
        if let Some(e) = self.syntax.take() {
            return Err(e);
        }
        let end = self.pos;
        match self.state {
            State::Value | State::ArrayFirst => Err(self.at_end_of_value(end)),
            State::ObjectFirst | State::ObjectKey => Err(error(end, "expected a property name in double quotes")),
            State::Colon => Err(error(end, "expected ':'")),
            State::AfterValue => self.after_value_at_end(end),
            State::Str { .. } | State::Escape { .. } => Err(error(end, "unterminated string")),
            State::Unicode { start, .. } => Err(error(start, "truncated \\u escape")),
            State::Literal { err_at, .. } => Err(error(err_at, "expected a JSON value")),
            State::Minus { start } => Err(error(start + 1, "expected a JSON value")),
            State::Int { start, digits, .. } => {
                Self::int_length(start, digits, false)?;
                self.after_value_at_end(end)
            }
            State::Dot { start, digits, dot } => {
                Self::int_length(start, digits, false)?;
                Err(self.after_value_error(dot))
            }
            State::Exponent {
                start,
                digits,
                float,
                e,
                ..
            } => {
                Self::int_length(start, digits, float)?;
                Err(self.after_value_error(e))
            }
            State::Fraction { .. } | State::ExponentDigits => self.after_value_at_end(end),
            State::Failed => Err(error(end, "internal: failed without an error")),
        }
    }

    fn fail(&mut self, e: ParseError) {
        self.syntax = Some(e);
        self.state = State::Failed;
    }

    fn at_end_of_value(&self, end: u64) -> ParseError {
        if self.stack.len() as u64 > self.max_depth as u64 {
            error(end, "JSON nesting too deep")
        } else {
            error(end, "unexpected end of JSON")
        }
    }

    fn after_value_at_end(&self, end: u64) -> Result<(), ParseError> {
        match self.stack.last() {
            None => Ok(()),
            Some(_) => Err(self.after_value_error(end)),
        }
    }

    /// The error for a byte after a value that is neither whitespace, `,` nor the closer.
    fn after_value_error(&self, at: u64) -> ParseError {
        match self.stack.last() {
            None => error(at, "extra data after the JSON value"),
            Some(b'[') => error(at, "expected ',' or ']'"),
            Some(_) => error(at, "expected ',' or '}'"),
        }
    }

    /// An integer literal of more digits than Python parses is an error at its start.
    fn int_length(start: u64, digits: u64, float: bool) -> Result<(), ParseError> {
        if !float && digits > MAX_INT_DIGITS {
            return Err(error(start, "integer literal too long"));
        }
        Ok(())
    }

    /// A number ended at byte `i` (not part of it): check it, then handle the byte as what
    /// follows a value. Returns the index to continue at.
    fn end_number(&mut self, start: u64, digits: u64, float: bool, i: usize) -> usize {
        if let Err(e) = Self::int_length(start, digits, float) {
            self.fail(e);
            return i;
        }
        self.state = State::AfterValue;
        i
    }

    /// Process input from `data[i]`; returns the index of the first byte not yet consumed.
    fn step(&mut self, data: &[u8], mut i: usize, base: u64) -> usize {
        let at = |i: usize| base + i as u64;
        match self.state {
            State::Value | State::ArrayFirst => {
                while i < data.len() && is_ws(data[i]) {
                    i += 1;
                }
                let Some(&b) = data.get(i) else { return i };
                if self.state == State::ArrayFirst && b == b']' {
                    self.stack.pop();
                    self.state = State::AfterValue;
                    return i + 1;
                }
                self.start_value(b, at(i));
                i + 1
            }
            State::ObjectFirst | State::ObjectKey => {
                while i < data.len() && is_ws(data[i]) {
                    i += 1;
                }
                let Some(&b) = data.get(i) else { return i };
                if self.state == State::ObjectFirst && b == b'}' {
                    self.stack.pop();
                    self.state = State::AfterValue;
                } else if b == b'"' {
                    self.state = State::Str { key: true };
                } else {
                    self.fail(error(at(i), "expected a property name in double quotes"));
                }
                i + 1
            }
            State::Colon => {
                while i < data.len() && is_ws(data[i]) {
                    i += 1;
                }
                let Some(&b) = data.get(i) else { return i };
                if b == b':' {
                    self.state = State::Value;
                } else {
                    self.fail(error(at(i), "expected ':'"));
                }
                i + 1
            }
            State::AfterValue => {
                while i < data.len() && is_ws(data[i]) {
                    i += 1;
                }
                let Some(&b) = data.get(i) else { return i };
                match (self.stack.last(), b) {
                    (Some(b'['), b',') => self.state = State::Value,
                    (Some(b'{'), b',') => self.state = State::ObjectKey,
                    (Some(b'['), b']') | (Some(b'{'), b'}') => {
                        self.stack.pop();
                    }
                    _ => {
                        let e = self.after_value_error(at(i));
                        self.fail(e);
                    }
                }
                i + 1
            }
            State::Str { key } => {
                // A run of plain characters at once.
                while i < data.len() {
                    let b = data[i];
                    if b == b'"' || b == b'\\' || b < 0x20 {
                        break;
                    }
                    i += 1;
                }
                let Some(&b) = data.get(i) else { return i };
                match b {
                    b'"' => self.state = if key { State::Colon } else { State::AfterValue },
                    b'\\' => self.state = State::Escape { key },
                    _ => self.fail(error(at(i), "control character in string")),
                }
                i + 1
            }
            State::Escape { key } => {
                match data[i] {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.state = State::Str { key },
                    b'u' => {
                        self.state = State::Unicode {
                            key,
                            start: at(i + 1),
                            seen: 0,
                            bad: false,
                        }
                    }
                    _ => self.fail(error(at(i), "invalid escape")),
                }
                i + 1
            }
            State::Unicode { key, start, seen, bad } => {
                let bad = bad || !data[i].is_ascii_hexdigit();
                let seen = seen + 1;
                self.state = if seen < 4 {
                    State::Unicode { key, start, seen, bad }
                } else if bad {
                    self.fail(error(start, "bad \\u escape"));
                    State::Failed
                } else {
                    State::Str { key }
                };
                i + 1
            }
            State::Literal { word, matched, err_at } => {
                if data[i] != word[matched as usize] {
                    self.fail(error(err_at, "expected a JSON value"));
                    return i;
                }
                let matched = matched + 1;
                self.state = if matched as usize == word.len() {
                    State::AfterValue
                } else {
                    State::Literal { word, matched, err_at }
                };
                i + 1
            }
            State::Minus { start } => {
                match data[i] {
                    b'I' => {
                        self.state = State::Literal {
                            word: b"Infinity",
                            matched: 1,
                            err_at: start + 1,
                        }
                    }
                    b'0' => {
                        self.state = State::Int {
                            start,
                            digits: 1,
                            zero: true,
                        }
                    }
                    b'1'..=b'9' => {
                        self.state = State::Int {
                            start,
                            digits: 1,
                            zero: false,
                        }
                    }
                    _ => {
                        self.fail(error(start + 1, "expected a JSON value"));
                        return i;
                    }
                }
                i + 1
            }
            State::Int { start, digits, zero } => {
                let mut digits = digits;
                if !zero {
                    let run = data[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                    digits += run as u64;
                    i += run;
                    self.state = State::Int { start, digits, zero };
                }
                let Some(&b) = data.get(i) else { return i };
                match b {
                    b'.' => {
                        self.state = State::Dot {
                            start,
                            digits,
                            dot: at(i),
                        };
                        i + 1
                    }
                    b'e' | b'E' => {
                        self.state = State::Exponent {
                            start,
                            digits,
                            float: false,
                            e: at(i),
                            signed: false,
                        };
                        i + 1
                    }
                    _ => self.end_number(start, digits, false, i),
                }
            }
            State::Dot { start, .. } => {
                if data[i].is_ascii_digit() {
                    self.state = State::Fraction { start };
                    i + 1
                } else {
                    // Not a fraction: the number ends before the `.`, which cannot follow a value.
                    let State::Dot { digits, dot, .. } = self.state else {
                        return i;
                    };
                    if let Err(e) = Self::int_length(start, digits, false) {
                        self.fail(e);
                    } else {
                        let e = self.after_value_error(dot);
                        self.fail(e);
                    }
                    i
                }
            }
            State::Fraction { start } => {
                let run = data[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                i += run;
                let Some(&b) = data.get(i) else { return i };
                if b == b'e' || b == b'E' {
                    self.state = State::Exponent {
                        start,
                        digits: 0,
                        float: true,
                        e: at(i),
                        signed: false,
                    };
                    i + 1
                } else {
                    self.end_number(start, 0, true, i)
                }
            }
            State::Exponent {
                start,
                digits,
                float,
                e,
                signed,
            } => {
                let b = data[i];
                if b.is_ascii_digit() {
                    self.state = State::ExponentDigits;
                    i + 1
                } else if !signed && (b == b'+' || b == b'-') {
                    self.state = State::Exponent {
                        start,
                        digits,
                        float,
                        e,
                        signed: true,
                    };
                    i + 1
                } else {
                    // Not an exponent: the number ends before the `e`, which cannot follow it.
                    if let Err(err) = Self::int_length(start, digits, float) {
                        self.fail(err);
                    } else {
                        let err = self.after_value_error(e);
                        self.fail(err);
                    }
                    i
                }
            }
            State::ExponentDigits => {
                let run = data[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                i += run;
                if i < data.len() {
                    self.state = State::AfterValue;
                }
                i
            }
            State::Failed => data.len(),
        }
    }

    /// The first byte `b` of a value at offset `at`.
    fn start_value(&mut self, b: u8, at: u64) {
        if self.stack.len() as u64 > self.max_depth as u64 {
            self.fail(error(at, "JSON nesting too deep"));
            return;
        }
        let literal = |word: &'static [u8]| State::Literal {
            word,
            matched: 1,
            err_at: at,
        };
        self.state = match b {
            b'{' => {
                self.stack.push(b'{');
                State::ObjectFirst
            }
            b'[' => {
                self.stack.push(b'[');
                State::ArrayFirst
            }
            b'"' => State::Str { key: false },
            b'n' => literal(b"null"),
            b't' => literal(b"true"),
            b'f' => literal(b"false"),
            b'N' => literal(b"NaN"),
            b'I' => literal(b"Infinity"),
            b'-' => State::Minus { start: at },
            b'0' => State::Int {
                start: at,
                digits: 1,
                zero: true,
            },
            b'1'..=b'9' => State::Int {
                start: at,
                digits: 1,
                zero: false,
            },
            _ => {
                self.fail(error(at, "expected a JSON value"));
                return;
            }
        };
    }

    /// UTF-8 validity of the whole stream, across piece boundaries.
    fn check_utf8(&mut self, mut data: &[u8]) {
        if self.utf8_error.is_some() {
            return;
        }
        let mut base = self.pos;
        if !self.utf8_carry.is_empty() {
            // Complete the sequence cut at the end of the last piece.
            let take = data.len().min(4);
            let mut joined = self.utf8_carry.clone();
            joined.extend_from_slice(&data[..take]);
            let carried = self.utf8_carry.len();
            match std::str::from_utf8(&joined) {
                Ok(_) => {
                    data = &data[take..];
                    base += take as u64;
                }
                Err(e) if e.valid_up_to() >= carried => {
                    let used = e.valid_up_to() - carried;
                    data = &data[used..];
                    base += used as u64;
                }
                Err(e) if e.error_len().is_none() => {
                    // Still incomplete: the piece was shorter than the sequence.
                    self.utf8_carry = joined;
                    return;
                }
                Err(_) => {
                    self.utf8_error = Some(self.utf8_carry_at);
                    return;
                }
            }
            self.utf8_carry.clear();
        }
        match std::str::from_utf8(data) {
            Ok(_) => {}
            Err(e) => {
                let at = base + e.valid_up_to() as u64;
                if e.error_len().is_none() {
                    self.utf8_carry = data[e.valid_up_to()..].to_vec();
                    self.utf8_carry_at = at;
                } else {
                    self.utf8_error = Some(at);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pjson;

    fn streamed(doc: &[u8], piece: usize, depth: u32) -> Result<(), ParseError> {
        let mut c = JsonCheck::new(depth);
        for p in doc.chunks(piece.max(1)) {
            c.feed(p);
        }
        if doc.is_empty() {
            c.feed(&[]);
        }
        c.finish()
    }

    fn agree(doc: &[u8], depth: u32) {
        let want = pjson::parse(doc, depth).map(|_| ());
        for piece in [1, 2, 3, 5, 7, 64, usize::MAX] {
            assert_eq!(
                streamed(doc, piece.min(doc.len().max(1)), depth),
                want,
                "{:?} in pieces of {piece}",
                String::from_utf8_lossy(doc)
            );
        }
    }

    #[test]
    fn agrees_with_the_parser_on_crafted_documents() {
        let docs: &[&[u8]] = &[
            b"",
            b"  ",
            b"1",
            b"-",
            b"-0",
            b"01",
            b"1.",
            b"1.5",
            b"1.e3",
            b"1e",
            b"1e+",
            b"1e+5",
            b"1E-0x",
            b"-Infinity",
            b"-Inf",
            b"-I",
            b"Infinity",
            b"NaN",
            b"nan",
            b"-NaN",
            b"null",
            b"nul",
            b"true ",
            b"false,",
            b"[]",
            b"[ ]",
            b"[1,]",
            b"[1 2]",
            b"[1,2",
            b"[",
            b"{",
            b"{}",
            b"{ }",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\":1,}",
            b"{\"a\":1 \"b\"}",
            b"{\"a\":1",
            b"{1:2}",
            b"\"abc",
            b"\"a\\qb\"",
            b"\"\\u12",
            b"\"\\u12g4\"",
            b"\"\\u1\"",
            b"\"\\uD800\"",
            b"\"a\nb\"",
            b"\"\\",
            b"[\"\\u00e9\", 2.5e-3]",
            b"{\"k\": [1, {\"x\": null}], \"k\": NaN}",
            b"[1.5.]",
            b"[1e5e]",
            b"0 0",
            b"[-]",
            b"[-a]",
            b"]",
            b"\xff",
            b"[\"\xc3\xa9\"]",
            b"[\"\xc3\"]",
            b"[1, \xe2\x82]",
            b"\"\xe2\x82\xac\"",
            b"[0x]",
            b"{\"a\" 1}",
            b"[\"a\",\"b\"]x",
            b"[[[[1]]]]",
            b"[[[[]]]]",
            b"[[[[[]]]]]",
            b"[[[",
            b"{\"a\":{\"b\":{\"c\":1}}}",
        ];
        for d in docs {
            agree(d, 3);
            agree(d, 64);
        }
        let long_int = format!("[{}]", "9".repeat(4301));
        agree(long_int.as_bytes(), 8);
        agree(format!("[{}.5]", "9".repeat(5000)).as_bytes(), 8);
        agree(format!("[{}e]", "9".repeat(5000)).as_bytes(), 8);
        agree(format!("{}.", "9".repeat(5000)).as_bytes(), 8);
        agree(format!("[{}]", "9".repeat(4300)).as_bytes(), 8);
    }

    #[test]
    fn agrees_with_the_parser_on_mutations() {
        // Every one-byte change and every cut of a document using each construct.
        let base: &[u8] =
            "{\"a\": [1, -2.5e+3, true, false, null, NaN, -Infinity, \"x\\u00e9\\n\u{e9}\"], \"b\": {\"c\": []}}"
                .as_bytes();
        let swaps = [
            b'"', b'\\', b'[', b']', b'{', b'}', b',', b':', b'1', b'e', b'.', b'-', b' ', 0x01, 0xC3, 0xFF,
        ];
        for i in 0..base.len() {
            for &x in &swaps {
                let mut d = base.to_vec();
                d[i] = x;
                agree(&d, 3);
            }
            agree(&base[..i], 3);
        }
    }
}
