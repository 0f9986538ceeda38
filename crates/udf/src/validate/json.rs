//! JSON rules: a JSON table holds one JSON document; an N-D table holds nested arrays of
//! exactly its real shape. `validate` checks them while parsing, without building the
//! document, so memory stays at the nesting depth and the longest string (serde_json's
//! recursion limit, 128, bounds the depth exactly as it does for a parsed `Value`).

use std::fmt;
use std::io::Read;

use rasterpack_common::Input;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::codes::{IO, JSON_INVALID, JSON_SHAPE};

/// The first rule a JSON document breaks: `(code, message)`.
pub(crate) type JsonFault = (&'static str, String);

/// Check the JSON document in `bytes` against the real `shape`.
pub(crate) fn check_json_slice(bytes: &[u8], shape: &[u32]) -> Result<(), JsonFault> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    check_json(&mut de, shape)
}

/// Check the JSON document stored at `offset` (`len` bytes) of `input`, read in pieces.
pub(crate) fn check_json_stored(input: &Input, offset: u64, len: u64, shape: &[u32]) -> Result<(), JsonFault> {
    if let Some(all) = input.as_bytes() {
        return match rasterpack_common::slice_at(all, offset, len, "table data") {
            Ok(b) => check_json_slice(b, shape),
            Err(e) => Err((IO, e.message)),
        };
    }
    let reader = std::io::BufReader::with_capacity(
        64 << 10,
        StoredReader {
            input,
            offset,
            left: len,
        },
    );
    let mut de = serde_json::Deserializer::from_reader(reader);
    check_json(&mut de, shape)
}

fn check_json<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    shape: &[u32],
) -> Result<(), JsonFault> {
    let mut shape_error = None;
    let parsed = Shaped {
        shape,
        error: &mut shape_error,
    }
    .deserialize(&mut *de)
    .and_then(|()| de.end());
    match parsed {
        Err(e) if e.is_io() => Err((IO, e.to_string())),
        Err(e) => Err((JSON_INVALID, e.to_string())),
        // A syntax error anywhere wins over a shape error, as when the whole document is
        // parsed first.
        Ok(()) => match shape_error {
            Some(m) => Err((JSON_SHAPE, m)),
            None => Ok(()),
        },
    }
}

/// The shape rule on a parsed document (the in-memory accessors parse a `Value` anyway).
pub(crate) fn json_shape(v: &Value, shape: &[u32]) -> Result<(), String> {
    let Some((&n, rest)) = shape.split_first() else {
        return Ok(());
    };
    match v {
        Value::Array(a) if a.len() as u64 == n as u64 => a.iter().try_for_each(|x| json_shape(x, rest)),
        Value::Array(a) => Err(format!("JSON array of {} items where the shape wants {n}", a.len())),
        _ => Err(format!("JSON value where the shape wants an array of {n}")),
    }
}

/// Reads `left` bytes of an input from `offset`.
struct StoredReader<'a> {
    input: &'a Input,
    offset: u64,
    left: u64,
}

impl Read for StoredReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.left) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.input
            .read_at(self.offset, &mut buf[..n], "table data")
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.offset += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}

/// A value that must be nested arrays of `shape` (any value when `shape` is empty). A
/// mismatch is recorded, not raised, so that parsing goes on to the end: the first mismatch in
/// document order is kept, except that an array of the wrong length replaces the mismatches
/// found inside it (the whole-document rule checks the length before the items).
struct Shaped<'a> {
    shape: &'a [u32],
    error: &'a mut Option<String>,
}

impl Shaped<'_> {
    fn mismatch(self) {
        if let (Some(&n), None) = (self.shape.first(), &self.error) {
            *self.error = Some(format!("JSON value where the shape wants an array of {n}"));
        }
    }
}

impl<'de> DeserializeSeed<'de> for Shaped<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        if self.shape.is_empty() {
            return de.deserialize_any(Skip).map(|_| ());
        }
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Shaped<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((&n, rest)) = self.shape.split_first() else {
            while seq.next_element::<Skip>()?.is_some() {}
            return Ok(());
        };
        let had_error = self.error.is_some();
        let mut count = 0u64;
        loop {
            let item = if count < n as u64 {
                seq.next_element_seed(Shaped {
                    shape: rest,
                    error: &mut *self.error,
                })?
            } else {
                seq.next_element::<Skip>()?.map(|_| ())
            };
            if item.is_none() {
                break;
            }
            count += 1;
        }
        if count != n as u64 && !had_error {
            *self.error = Some(format!("JSON array of {count} items where the shape wants {n}"));
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        Skip.visit_map(map)?;
        self.mismatch();
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.mismatch();
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.mismatch();
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.mismatch();
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.mismatch();
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        self.mismatch();
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.mismatch();
        Ok(())
    }
}

/// Any JSON value, parsed the way a `Value` is (recursively, so serde_json's depth limit
/// applies) but not kept.
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Skip, D::Error> {
        de.deserialize_any(Skip)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The streaming rule agrees with parsing a `Value` and checking its shape.
    #[test]
    fn streaming_check_agrees_with_the_whole_document_rule() {
        let docs = [
            "[1, 2]",
            "[[1, 2], [3]]",
            "[[1], [2, 3], 4]",
            "[[1, 2, 3], [4]]",
            "{\"a\": [1, 2]}",
            "[{\"a\": 1}, [2]]",
            "3",
            "\"text\"",
            "[1, 2",
            "[1, 2] x",
            "[[1, 2], [3, {]]",
            "[1e400]",
            "[]",
            "null",
        ];
        let shapes: [&[u32]; 5] = [&[], &[2], &[2, 2], &[3, 1], &[0]];
        for doc in docs {
            for shape in shapes {
                let whole = match serde_json::from_str::<Value>(doc) {
                    Err(e) => Err((JSON_INVALID, e.to_string())),
                    Ok(v) => json_shape(&v, shape).map_err(|m| (JSON_SHAPE, m)),
                };
                assert_eq!(check_json_slice(doc.as_bytes(), shape), whole, "{doc} {shape:?}");
            }
        }
        // Depth: serde_json's limit applies as for a Value.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(check_json_slice(deep.as_bytes(), &[]).unwrap_err().0, JSON_INVALID);
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        assert!(check_json_slice(json!({"k": [1, "x"]}).to_string().as_bytes(), &[]).is_ok());
    }
}
