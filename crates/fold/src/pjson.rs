//! JSON as Python's `json` module reads and writes it.
//!
//! The FOLD manifest hash is the SHA-256 of `json.dumps(metadata, sort_keys=True,
//! separators=(",", ":"))`, so reproducing it byte for byte needs what serde_json throws away:
//! whether a number was an int or a float (`1` vs `1.0`), integers of any size, the `NaN`,
//! `Infinity` and `-Infinity` tokens, lone UTF-16 surrogates in strings, and Python's float
//! repr. This module keeps all of it: strings are UTF-16 code units, ints keep their digits.

use std::fmt::Write as _;

/// A JSON string as UTF-16 code units (Python `str` after `json.loads`, lone surrogates kept).
#[derive(Debug, Clone, Default)]
pub struct JStr(pub Vec<u16>);

impl std::hash::Hash for JStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl PartialEq for JStr {
    fn eq(&self, other: &JStr) -> bool {
        crate::work::tick(1);
        self.0 == other.0
    }
}

impl Eq for JStr {}

impl JStr {
    /// The string `s` as UTF-16 code units.
    pub fn new(s: &str) -> JStr {
        JStr(s.encode_utf16().collect())
    }
    /// Lossy Rust string (lone surrogates become U+FFFD).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf16_lossy(&self.0)
    }
    /// The exact string, when it holds no lone surrogate.
    pub fn as_string(&self) -> Option<String> {
        String::from_utf16(&self.0).ok()
    }
    /// Whether this string is `s` (compared as UTF-16 code units).
    pub fn eq_str(&self, s: &str) -> bool {
        crate::work::tick(1);
        self.0.iter().copied().eq(s.encode_utf16())
    }
    /// Code points, pairs combined, lone surrogates as themselves: Python's `str` order.
    fn code_points(&self) -> Vec<u32> {
        char::decode_utf16(self.0.iter().copied())
            .map(|r| match r {
                Ok(c) => c as u32,
                Err(e) => e.unpaired_surrogate() as u32,
            })
            .collect()
    }
}

/// A parsed JSON value with Python's distinctions.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A Python int: decimal digits with an optional leading `-`, normalized (`-0` -> `0`).
    Int(String),
    /// A Python float (also `NaN`, `Infinity`, `-Infinity`, and number literals with `.`/`e`).
    Float(f64),
    /// A string.
    Str(JStr),
    /// An array.
    Array(Vec<Value>),
    /// Members in file order; duplicate keys are kept (lookups take the last, as Python does).
    Object(Vec<(JStr, Value)>),
}

impl Value {
    /// A string value.
    pub fn str(s: &str) -> Value {
        Value::Str(JStr::new(s))
    }
    /// An int value.
    pub fn int(i: impl Into<i128>) -> Value {
        Value::Int(i.into().to_string())
    }
    /// An object of these members, in this order.
    pub fn object(members: Vec<(&str, Value)>) -> Value {
        Value::Object(members.into_iter().map(|(k, v)| (JStr::new(k), v)).collect())
    }

    /// Member lookup; the last duplicate wins, as in a Python dict. Linear in the members:
    /// callers look up a fixed set of keys, never one key per member.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().rev().find(|(k, _)| k.eq_str(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The members of an object as a Python dict holds them after `json.loads`: one per key, at
    /// the place of the key's first occurrence, holding the value of its last. Hashing keeps
    /// this linear in the members (a 100k-key object costs 100k lookups, not 5e9 comparisons).
    pub fn dict_members(members: &[(JStr, Value)]) -> Vec<(&JStr, &Value)> {
        let mut slot: std::collections::HashMap<&JStr, usize> = std::collections::HashMap::with_capacity(members.len());
        let mut uniq: Vec<(&JStr, &Value)> = Vec::with_capacity(members.len());
        for (k, v) in members {
            match slot.entry(k) {
                std::collections::hash_map::Entry::Occupied(e) => uniq[*e.get()].1 = v,
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(uniq.len());
                    uniq.push((k, v));
                }
            }
        }
        uniq
    }
    /// The string, when this is one without lone surrogates.
    pub fn as_str(&self) -> Option<String> {
        match self {
            Value::Str(s) => s.as_string(),
            _ => None,
        }
    }
    /// A non-negative int that fits u64.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(d) => d.parse().ok(),
            _ => None,
        }
    }
    /// The number as an f64 (ints converted), when this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(d) => d.parse().ok(),
            _ => None,
        }
    }
    /// The JSON type, for messages (`object`, `int`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// For reports: serde_json value, non-finite floats as the CLI's strings, huge ints as strings.
    pub fn to_serde(&self) -> serde_json::Value {
        use serde_json::Value as S;
        match self {
            Value::Null => S::Null,
            Value::Bool(b) => S::Bool(*b),
            Value::Int(d) => {
                if let Ok(i) = d.parse::<i64>() {
                    S::from(i)
                } else if let Ok(u) = d.parse::<u64>() {
                    S::from(u)
                } else {
                    S::String(d.clone())
                }
            }
            Value::Float(f) => rasterpack_common::json::f64_value(*f),
            Value::Str(s) => S::String(s.to_string_lossy()),
            Value::Array(a) => S::Array(a.iter().map(Value::to_serde).collect()),
            Value::Object(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m {
                    out.insert(k.to_string_lossy(), v.to_serde());
                }
                S::Object(out)
            }
        }
    }

    /// From a serde_json value (for metadata supplied by callers). Integers stay ints.
    pub fn from_serde(v: &serde_json::Value) -> Value {
        use serde_json::Value as S;
        match v {
            S::Null => Value::Null,
            S::Bool(b) => Value::Bool(*b),
            S::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::int(u)
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            S::String(s) => Value::str(s),
            S::Array(a) => Value::Array(a.iter().map(Value::from_serde).collect()),
            S::Object(m) => Value::Object(m.iter().map(|(k, v)| (JStr::new(k), Value::from_serde(v))).collect()),
        }
    }
}

/// Why a document is not JSON as Python reads it, and at which byte.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// Byte offset in the document.
    pub offset: usize,
    /// What is wrong there.
    pub message: String,
}

/// Python's `int` refuses to parse more digits than this (`sys.get_int_max_str_digits()`).
const MAX_INT_DIGITS: usize = 4300;

/// Parse a UTF-8 JSON document the way `json.loads(text)` does (strict mode, NaN tokens allowed).
pub fn parse(bytes: &[u8], max_depth: u32) -> Result<Value, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError {
        offset: e.valid_up_to(),
        message: "invalid UTF-8".into(),
    })?;
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        max_depth,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("extra data after the JSON value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    max_depth: u32,
}

impl Parser<'_> {
    fn err(&self, m: &str) -> ParseError {
        ParseError {
            offset: self.i,
            message: m.to_string(),
        }
    }
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }
    fn lit(&mut self, word: &[u8]) -> bool {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self, depth: u32) -> Result<Value, ParseError> {
        if depth > self.max_depth {
            return Err(self.err("JSON nesting too deep"));
        }
        match self.s.get(self.i) {
            None => Err(self.err("unexpected end of JSON")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b'n') if self.lit(b"null") => Ok(Value::Null),
            Some(b't') if self.lit(b"true") => Ok(Value::Bool(true)),
            Some(b'f') if self.lit(b"false") => Ok(Value::Bool(false)),
            Some(b'N') if self.lit(b"NaN") => Ok(Value::Float(f64::NAN)),
            Some(b'I') if self.lit(b"Infinity") => Ok(Value::Float(f64::INFINITY)),
            Some(b'-') if self.s[self.i..].starts_with(b"-Infinity") => {
                self.i += 9;
                Ok(Value::Float(f64::NEG_INFINITY))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("expected a JSON value")),
        }
    }
    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.s.get(self.i) {
            self.i += 1;
        }
        self.i - start
    }
    /// `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`, as Python's scanner matches it.
    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        let neg = self.s[self.i] == b'-';
        if neg {
            self.i += 1;
        }
        let int_start = self.i;
        match self.s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("expected a JSON value")),
        }
        let int_end = self.i;
        let mut is_float = false;
        if self.s.get(self.i) == Some(&b'.') && matches!(self.s.get(self.i + 1), Some(b'0'..=b'9')) {
            self.i += 1;
            self.digits();
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.s.get(self.i) {
            let save = self.i;
            self.i += 1;
            if let Some(b'+' | b'-') = self.s.get(self.i) {
                self.i += 1;
            }
            if self.digits() == 0 {
                self.i = save; // not an exponent: Python's regex stops before the 'e'
            } else {
                is_float = true;
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("0");
        if is_float {
            // Rust's parse is correctly rounded like Python's float(); overflow gives +-inf.
            let f = text.parse::<f64>().map_err(|_| ParseError {
                offset: start,
                message: "bad number".into(),
            })?;
            Ok(Value::Float(f))
        } else {
            let digits = std::str::from_utf8(&self.s[int_start..int_end]).unwrap_or("0");
            if digits.len() > MAX_INT_DIGITS {
                return Err(ParseError {
                    offset: start,
                    message: "integer literal too long".into(),
                });
            }
            let neg = neg && digits != "0";
            Ok(Value::Int(if neg { format!("-{digits}") } else { digits.to_string() }))
        }
    }
    fn hex4(&mut self) -> Result<u16, ParseError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("truncated \\u escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("bad \\u escape"))?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.err("bad \\u escape"));
        }
        let v = u16::from_str_radix(h, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }
    fn string(&mut self) -> Result<JStr, ParseError> {
        self.i += 1; // opening quote
        let mut out: Vec<u16> = Vec::new();
        loop {
            let start = self.i;
            // Copy a run of plain characters at once.
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            if self.i > start {
                // The input is valid UTF-8 and the run stops at ASCII bytes, so this is a str.
                let run = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.err("invalid UTF-8"))?;
                out.extend(run.encode_utf16());
            }
            match self.s.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(JStr(out));
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = *self.s.get(self.i).ok_or_else(|| self.err("unterminated string"))?;
                    self.i += 1;
                    let unit = match c {
                        b'"' => b'"' as u16,
                        b'\\' => b'\\' as u16,
                        b'/' => b'/' as u16,
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => 10,
                        b'r' => 13,
                        b't' => 9,
                        b'u' => self.hex4()?,
                        _ => {
                            self.i -= 1;
                            return Err(self.err("invalid escape"));
                        }
                    };
                    out.push(unit);
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }
    fn array(&mut self, depth: u32) -> Result<Value, ParseError> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }
    fn object(&mut self, depth: u32) -> Result<Value, ParseError> {
        self.i += 1;
        let mut members = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a property name in double quotes"));
            }
            let key = self.string()?;
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.err("expected ':'"));
            }
            self.i += 1;
            self.ws();
            let v = self.value(depth + 1)?;
            members.push((key, v));
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }
}

/// Python's `repr(float)`: shortest round-trip digits, fixed notation for decimal exponents
/// -4 < decpt <= 16, else `d.ddde+XX` with at least two exponent digits.
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Rust's `{:e}` prints the shortest round-trip digits, like Python's repr.
    let e = format!("{:e}", x.abs());
    let (mant, _) = e.split_once('e').unwrap_or((&e, "0"));
    let n = mant.chars().filter(|c| c.is_ascii_digit()).count();
    // When two n-digit strings round-trip equally close (x is an exact tie), Python's dtoa
    // picks the even one; exact formatting at n digits rounds half to even, so prefer it when
    // it still round-trips.
    let exact = format!("{:.*e}", n.saturating_sub(1), x.abs());
    let e = if exact.parse::<f64>().ok() == Some(x.abs()) {
        exact
    } else {
        e
    };
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let decpt = exp + 1;
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    let nd = digits.len() as i32;
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            for _ in 0..-decpt {
                out.push('0');
            }
            out.push_str(&digits);
        } else if decpt >= nd {
            out.push_str(&digits);
            for _ in 0..decpt - nd {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&digits[..decpt as usize]);
            out.push('.');
            out.push_str(&digits[decpt as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if nd > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    out
}

/// How strings are escaped: `ensure_ascii=True` (the manifest hash) or `False` (the index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ascii {
    /// Every non-ASCII character as `\uXXXX` (`ensure_ascii=True`).
    Escape,
    /// Characters as they are (`ensure_ascii=False`).
    Raw,
}

fn push_str_escaped(out: &mut String, s: &JStr, ascii: Ascii) {
    out.push('"');
    let units = &s.0;
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        match u {
            0x22 => out.push_str("\\\""),
            0x5c => out.push_str("\\\\"),
            0x0a => out.push_str("\\n"),
            0x0d => out.push_str("\\r"),
            0x09 => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            0x20..=0x7e => out.push(u as u8 as char),
            _ if u < 0x20 || ascii == Ascii::Escape => {
                // Astral characters are already surrogate pairs in UTF-16: one escape per unit.
                let _ = write!(out, "\\u{u:04x}");
            }
            _ => {
                // Raw mode: emit the character itself (a pair when it is one).
                if (0xD800..0xDC00).contains(&u) && i + 1 < units.len() && (0xDC00..0xE000).contains(&units[i + 1]) {
                    let c = char::decode_utf16([u, units[i + 1]]).next().and_then(|r| r.ok());
                    out.push(c.unwrap_or('\u{FFFD}'));
                    i += 1;
                } else {
                    out.push(char::from_u32(u as u32).unwrap_or('\u{FFFD}'));
                }
            }
        }
        i += 1;
    }
    out.push('"');
}

/// `json.dumps(v, separators=(",", ":"), sort_keys=..., ensure_ascii=...)`.
pub fn dumps(v: &Value, sort_keys: bool, ascii: Ascii) -> String {
    let mut out = String::new();
    dump_into(&mut out, v, sort_keys, ascii);
    out
}

fn dump_into(out: &mut String, v: &Value, sort_keys: bool, ascii: Ascii) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(d) => out.push_str(d),
        Value::Float(f) => out.push_str(&py_float_repr(*f)),
        Value::Str(s) => push_str_escaped(out, s, ascii),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                dump_into(out, item, sort_keys, ascii);
            }
            out.push(']');
        }
        Value::Object(members) => {
            // A Python dict built by json.loads: one entry per key, at the first key's place,
            // holding the last value.
            let mut uniq = Value::dict_members(members);
            if sort_keys {
                let mut keyed: Vec<(Vec<u32>, &JStr, &Value)> =
                    uniq.into_iter().map(|(k, v)| (k.code_points(), k, v)).collect();
                keyed.sort_by(|a, b| {
                    crate::work::tick(1);
                    a.0.cmp(&b.0)
                });
                uniq = keyed.into_iter().map(|(_, k, v)| (k, v)).collect();
            }
            out.push('{');
            for (n, (k, val)) in uniq.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                push_str_escaped(out, k, ascii);
                out.push(':');
                dump_into(out, val, sort_keys, ascii);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases: &[(f64, &str)] = &[
            (1e-7, "1e-07"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (2.0, "2.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1767225600.0, "1767225600.0"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.3333333333333333, "0.3333333333333333"),
            (1234.5678, "1234.5678"),
            // exact ties between two shortest candidates: Python rounds half to even
            (f64::from_bits(0xc30f_a36f_d398_d412), "-1113178120592002.2"),
            (f64::from_bits(0x42d9_636d_0366_5f08), "111659285584252.12"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(*x), *want, "{x:e}");
        }
    }

    #[test]
    fn parse_and_dump_python_style() {
        let src = r#"{"b":1,"a":[1.0,NaN,-Infinity,Infinity,-0,1E2,"\u00e9\ud83d\ude00\ud800/"],"a":true}"#;
        let v = parse(src.as_bytes(), 64).unwrap();
        assert_eq!(dumps(&v, true, Ascii::Escape), r#"{"a":true,"b":1}"#);
        let arr = match &v {
            Value::Object(m) => m[1].1.clone(),
            _ => panic!(),
        };
        assert_eq!(
            dumps(&arr, true, Ascii::Escape),
            r#"[1.0,NaN,-Infinity,Infinity,0,100.0,"\u00e9\ud83d\ude00\ud800/"]"#
        );
        assert!(parse(b"[1,]", 64).is_err());
        assert!(parse(b"01", 64).is_err());
        assert!(parse(b"-NaN", 64).is_err());
        assert!(parse(b"nan", 64).is_err());
        assert!(parse(b"\"a\nb\"", 64).is_err());
        assert!(parse(b"[[[[1]]]]", 2).is_err());
    }

    #[test]
    fn key_order_is_code_point_order() {
        let v = Value::object(vec![
            ("\u{ff61}", Value::Null),
            ("\u{1F600}", Value::Null),
            ("Z", Value::Null),
        ]);
        assert_eq!(
            dumps(&v, true, Ascii::Escape),
            r#"{"Z":null,"\uff61":null,"\ud83d\ude00":null}"#
        );
        assert_eq!(
            dumps(&v, false, Ascii::Raw),
            "{\"\u{ff61}\":null,\"\u{1F600}\":null,\"Z\":null}"
        );
    }
}
