//! The header rules of the VOLP spec and of rasterpack's decisions where the spec is open
//! (docs/formats/volp.md), one function per rule group. Each reads its keys, records broken
//! rules as errors and remarks as notes, and returns what it could read; [`check_header`] runs
//! them all (never stopping at the first broken rule) and accepts the header only when no rule
//! failed.

use rasterpack_common::{DType, Error, Findings};
use serde_json::{Map, Value};

use crate::json::{JValue, Node};
use crate::model::{VolpHeader, VolpMetadata, VOLP_DTYPES};
use crate::raw::{KNOWN_KEYS, MAX_BODY_LEN};

/// The outcome of reading the header fields: the accepted header (when no rule failed), every
/// broken rule, and warnings/notes.
#[derive(Debug, Clone, Default)]
pub struct HeaderCheck {
    /// The header, when every rule holds.
    pub header: Option<VolpHeader>,
    /// Every broken rule, in the order checked.
    pub errors: Vec<Error>,
    /// Warnings and remarks (defaults applied, metadata that does not match).
    pub notes: Findings,
    /// The dtype, when its rule holds (reported even when other rules fail).
    pub dtype: Option<DType>,
    /// The shape, when its rule holds (reported even when other rules fail).
    pub shape: Option<[u64; 3]>,
    /// False when `compression` is present and not zstd: the body cannot be interpreted.
    pub compression_ok: bool,
    /// The whole header as JSON, in file order.
    pub json: Map<String, Value>,
}

/// The header's members and where they are, for the rule functions.
struct Members<'m> {
    members: &'m [(String, Node)],
    /// Absolute offset of the header text.
    base: u64,
}

impl<'m> Members<'m> {
    fn get(&self, key: &str) -> Option<&'m Node> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, n)| n)
    }

    /// Absolute offset of a value.
    fn at(&self, node: &Node) -> u64 {
        self.base + node.offset as u64
    }
}

/// Apply every header rule of the spec and of rasterpack's decisions (docs/formats/volp.md) to
/// the members of the header object whose text starts at absolute offset `base`.
pub fn check_header(members: &[(String, Node)], base: u64) -> HeaderCheck {
    let m = Members { members, base };
    let mut c = HeaderCheck {
        compression_ok: true,
        json: members.iter().map(|(k, v)| (k.clone(), v.value.to_serde())).collect(),
        ..Default::default()
    };
    let (version, version_text) = read_version(&m, &mut c);
    c.dtype = read_dtype(&m, &mut c);
    c.shape = read_shape(&m, &mut c);
    check_body_size(&m, &mut c);
    let compression = read_compression(&m, &mut c);
    let scale = number_or_default(&m, &mut c, "scale", 1.0);
    let offset = number_or_default(&m, &mut c, "offset", 0.0);
    let metadata = read_metadata(&m);
    check_metadata(&m, c.shape, &mut c.notes);
    let unknown = unknown_keys(&m, &mut c.notes);
    if let (true, Some(dtype), Some(shape)) = (c.errors.is_empty(), c.dtype, c.shape) {
        c.header = Some(VolpHeader {
            version,
            version_text,
            dtype,
            shape,
            scale,
            offset,
            compression,
            metadata,
            unknown,
            unknown_json: members
                .iter()
                .filter(|(k, _)| !KNOWN_KEYS.contains(&k.as_str()))
                .map(|(k, n)| (k.clone(), n.value.to_json_text()))
                .collect(),
        });
    }
    c
}

/// `version`: an integral number, or null/missing (1); below 1 reads as 1, above 1 decodes with
/// the version 1 layout. Returns the effective version and its text: the number as written when
/// it is above 1 (`1e400` is larger than any u64 and is reported as itself), else `"1"`.
fn read_version(m: &Members<'_>, c: &mut HeaderCheck) -> (u64, String) {
    let one = || (1, "1".to_string());
    let Some(n) = m.get("version") else {
        c.notes
            .info("volp.version.missing", None, "no \"version\" key: read as version 1");
        return one();
    };
    let at = m.at(n);
    let below_one = |c: &mut HeaderCheck, raw: &str| {
        c.notes.info(
            "volp.version.defaulted",
            Some(at),
            format!("version {raw} is below 1: read as version 1"),
        );
        one()
    };
    let (version, text) = match &n.value {
        JValue::Null => {
            c.notes.info(
                "volp.version.missing",
                Some(at),
                "\"version\" is null: read as version 1",
            );
            one()
        }
        JValue::Number { raw, .. } => match integral(raw) {
            Integral::Value { negative, magnitude } if negative || magnitude < 1 => below_one(c, raw),
            Integral::Value { magnitude, .. } => (magnitude, magnitude.to_string()),
            Integral::TooLarge { negative: true } => below_one(c, raw),
            Integral::TooLarge { negative: false } => (u64::MAX, raw.clone()),
            Integral::Fraction => {
                c.errors.push(Error::invalid(
                    "volp.version.invalid",
                    at,
                    format!("\"version\" must be an integer, found {raw}"),
                ));
                one()
            }
        },
        other => {
            c.errors.push(Error::invalid(
                "volp.version.invalid",
                at,
                format!("\"version\" must be an integer, found {}", other.type_name()),
            ));
            one()
        }
    };
    if version > 1 {
        c.notes.info(
            "volp.version.newer",
            Some(at),
            format!("version {text} is newer than 1: decoded with the version 1 layout"),
        );
    }
    (version, text)
}

/// `dtype`: required, exactly one of the five names.
fn read_dtype(m: &Members<'_>, c: &mut HeaderCheck) -> Option<DType> {
    let Some(n) = m.get("dtype") else {
        c.errors.push(Error::invalid_at(
            "volp.dtype.missing",
            Some(m.base),
            "required key \"dtype\" is missing",
        ));
        return None;
    };
    match &n.value {
        JValue::String(s) => {
            let dtype = DType::from_name(s).filter(|d| VOLP_DTYPES.contains(d));
            if dtype.is_none() {
                c.errors.push(Error::invalid(
                    "volp.dtype.unsupported",
                    m.at(n),
                    format!(
                        "dtype \"{}\" is not one of uint8, int16, int32, float32, float64",
                        s.escape_debug()
                    ),
                ));
            }
            dtype
        }
        other => {
            c.errors.push(Error::invalid(
                "volp.dtype.invalid",
                m.at(n),
                format!("\"dtype\" must be a string, found {}", other.type_name()),
            ));
            None
        }
    }
}

/// `shape`: required, exactly 3 integral numbers >= 1 (`[levels, lat, lon]`).
fn read_shape(m: &Members<'_>, c: &mut HeaderCheck) -> Option<[u64; 3]> {
    let Some(n) = m.get("shape") else {
        c.errors.push(Error::invalid_at(
            "volp.shape.missing",
            Some(m.base),
            "required key \"shape\" is missing",
        ));
        return None;
    };
    let items = match &n.value {
        JValue::Array(items) if items.len() == 3 => items,
        JValue::Array(items) => {
            c.errors.push(Error::invalid(
                "volp.shape.invalid",
                m.at(n),
                format!(
                    "shape must have exactly 3 dimensions [levels, lat, lon], found {}",
                    items.len()
                ),
            ));
            return None;
        }
        other => {
            c.errors.push(Error::invalid(
                "volp.shape.invalid",
                m.at(n),
                format!("shape must be an array of 3 integers, found {}", other.type_name()),
            ));
            return None;
        }
    };
    let mut dims = [0u64; 3];
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match dimension(&item.value) {
            Ok(d) => dims[i] = d,
            Err(problem) => {
                ok = false;
                c.errors.push(Error::invalid(
                    "volp.shape.invalid",
                    m.at(item),
                    format!("shape[{i}] must be an integer >= 1: {problem}"),
                ));
            }
        }
    }
    ok.then_some(dims)
}

/// One shape dimension: an integral number >= 1 that fits in 64 bits.
fn dimension(value: &JValue) -> std::result::Result<u64, String> {
    match value {
        JValue::Number { raw, .. } => match integral(raw) {
            Integral::Value {
                negative: false,
                magnitude,
            } if magnitude >= 1 => Ok(magnitude),
            Integral::Value { .. } | Integral::TooLarge { negative: true } => Err(format!("{raw} is below 1")),
            Integral::TooLarge { negative: false } => Err(format!("{raw} does not fit in 64 bits")),
            Integral::Fraction => Err(format!("{raw} is not an integer")),
        },
        other => Err(format!("found {}", other.type_name())),
    }
}

/// The decoded body size `product(shape) * size(dtype)`: checked products, then the 256 MiB
/// limit, all before any decompression.
fn check_body_size(m: &Members<'_>, c: &mut HeaderCheck) {
    let Some(dims) = c.shape else { return };
    let shape_at = m.get("shape").map(|n| m.at(n));
    let Some(elements) = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) else {
        c.errors.push(Error::invalid_at(
            "volp.shape.overflow",
            shape_at,
            format!("shape {dims:?} has more elements than 64 bits can count"),
        ));
        return;
    };
    let Some(dtype) = c.dtype else { return };
    match elements.checked_mul(dtype.size() as u64) {
        None => c.errors.push(Error::invalid_at(
            "volp.shape.overflow",
            shape_at,
            format!("shape {dims:?} x {} bytes overflows 64 bits", dtype.size()),
        )),
        Some(len) if len > MAX_BODY_LEN => c.errors.push(Error::invalid_at(
            "volp.limit.body",
            shape_at,
            format!("decoded body would be {len} bytes, above the limit of {MAX_BODY_LEN} bytes (256 MiB)"),
        )),
        Some(_) => {}
    }
}

/// `compression`: `zstd` in any case; missing means zstd (a warning); anything else makes the
/// body unreadable. Returns the name as written.
fn read_compression(m: &Members<'_>, c: &mut HeaderCheck) -> String {
    let Some(n) = m.get("compression") else {
        c.notes.warning(
            "volp.compression.missing",
            None,
            "no \"compression\" key: assuming \"zstd\"",
        );
        return "zstd".into();
    };
    let problem = match &n.value {
        JValue::String(s) if s.eq_ignore_ascii_case("zstd") => return s.clone(),
        JValue::String(s) => format!(
            "compression \"{}\" is not supported: only \"zstd\" is defined",
            s.escape_debug()
        ),
        other => format!(
            "\"compression\" must be the string \"zstd\", found {}",
            other.type_name()
        ),
    };
    c.compression_ok = false;
    c.errors
        .push(Error::invalid("volp.compression.unknown", m.at(n), problem));
    "zstd".into()
}

/// `scale` / `offset`: used when a finite number; missing is a remark, anything else a warning,
/// and either way the default applies.
fn number_or_default(m: &Members<'_>, c: &mut HeaderCheck, key: &str, default: f64) -> f64 {
    let Some(n) = m.get(key) else {
        c.notes.info(
            format!("volp.{key}.missing"),
            None,
            format!("no \"{key}\" key: using {default:?}"),
        );
        return default;
    };
    let what = match &n.value {
        JValue::Number { value, .. } if value.is_finite() => return *value,
        JValue::Number { raw, .. } => format!("{raw} (out of the f64 range)"),
        JValue::String(s) => format!("the string \"{}\"", s.escape_debug()),
        other => other.type_name().to_string(),
    };
    c.notes.warning(
        format!("volp.{key}.invalid"),
        Some(m.at(n)),
        format!("\"{key}\" is {what}, not a finite number: using {default:?}"),
    );
    default
}

/// The common metadata keys, as found.
fn read_metadata(m: &Members<'_>) -> VolpMetadata {
    let value = |k: &str| m.get(k).map(|n| n.value.to_serde());
    VolpMetadata {
        bbox: value("bbox"),
        levels: value("levels"),
        variable: value("variable"),
        valid_time: value("valid_time"),
    }
}

/// Metadata is shown, never enforced: what does not match the spec's description or the shape
/// is an info finding.
fn check_metadata(m: &Members<'_>, shape: Option<[u64; 3]>, notes: &mut Findings) {
    for (k, n) in m.members {
        let at = Some(m.at(n));
        match (k.as_str(), &n.value) {
            ("levels", JValue::Array(items)) => {
                if let Some(s) = shape.filter(|s| items.len() as u64 != s[0]) {
                    notes.info(
                        "volp.metadata.levels_len",
                        at,
                        format!(
                            "\"levels\" has {} entries for shape[0] = {} (not used for decoding)",
                            items.len(),
                            s[0]
                        ),
                    );
                }
            }
            ("bbox", JValue::Object(members)) => {
                let missing: Vec<&str> = ["west", "south", "east", "north", "bottom", "top"]
                    .into_iter()
                    .filter(|key| {
                        !members
                            .iter()
                            .any(|(mk, mv)| mk == key && matches!(mv.value, JValue::Number { .. }))
                    })
                    .collect();
                if !missing.is_empty() {
                    notes.info(
                        "volp.metadata.bbox",
                        at,
                        format!("\"bbox\" lacks numeric {}", missing.join(", ")),
                    );
                }
            }
            ("variable" | "valid_time", JValue::String(_)) => {}
            ("levels" | "bbox" | "variable" | "valid_time", v) => {
                let expected = match k.as_str() {
                    "levels" => "an array",
                    "bbox" => "an object",
                    _ => "a string",
                };
                notes.info(
                    "volp.metadata.type",
                    at,
                    format!("\"{k}\" is {}, expected {expected}", v.type_name()),
                );
            }
            _ => {}
        }
    }
}

/// Keys the spec does not define: kept in file order and named in one remark.
fn unknown_keys(m: &Members<'_>, notes: &mut Findings) -> Map<String, Value> {
    let unknown: Map<String, Value> = m
        .members
        .iter()
        .filter(|(k, _)| !KNOWN_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.value.to_serde()))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.keys().map(String::as_str).collect();
        notes.info(
            "volp.header.unknown_keys",
            None,
            format!("unknown header keys ignored: {}", names.join(", ")),
        );
    }
    unknown
}

/// An integral JSON number, exactly: `2`, `2.0`, `2e0`, `20e-1` are 2; `2.5` and `1e-400` are
/// not integral. Computed from the digits, never through a float.
enum Integral {
    Value { negative: bool, magnitude: u64 },
    TooLarge { negative: bool },
    Fraction,
}

fn integral(raw: &str) -> Integral {
    let (negative, body) = match raw.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, raw),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => (body, "0"),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    // Saturating exponent: anything beyond +-10^6 behaves like infinity here.
    let exp_neg = exp.starts_with('-');
    let exp_digits = exp.trim_start_matches(['+', '-']);
    let mut e: i64 = 0;
    for c in exp_digits.bytes() {
        e = (e * 10 + (c - b'0') as i64).min(1_000_000);
    }
    if exp_neg {
        e = -e;
    }
    let digits: Vec<u8> = int_part.bytes().chain(frac_part.bytes()).map(|c| c - b'0').collect();
    let mut e = e - frac_part.len() as i64;
    let mut sig: &[u8] = &digits;
    while let Some((&0, rest)) = sig.split_last() {
        sig = rest;
        e += 1;
    }
    while let Some((&0, rest)) = sig.split_first() {
        sig = rest;
    }
    if sig.is_empty() {
        return Integral::Value { negative, magnitude: 0 };
    }
    if e < 0 {
        return Integral::Fraction;
    }
    if sig.len() as i64 + e > 20 {
        return Integral::TooLarge { negative };
    }
    let mut m: u64 = 0;
    for &d in sig {
        match m.checked_mul(10).and_then(|x| x.checked_add(d as u64)) {
            Some(x) => m = x,
            None => return Integral::TooLarge { negative },
        }
    }
    for _ in 0..e {
        match m.checked_mul(10) {
            Some(x) => m = x,
            None => return Integral::TooLarge { negative },
        }
    }
    Integral::Value { negative, magnitude: m }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(raw: &str) -> Option<u64> {
        match integral(raw) {
            Integral::Value {
                negative: false,
                magnitude,
            } => Some(magnitude),
            _ => None,
        }
    }

    #[test]
    fn integral_numbers_are_exact() {
        assert_eq!(int("2"), Some(2));
        assert_eq!(int("2.0"), Some(2));
        assert_eq!(int("2e0"), Some(2));
        assert_eq!(int("20E-1"), Some(2));
        assert_eq!(int("0.02e2"), Some(2));
        assert_eq!(int("18446744073709551615"), Some(u64::MAX));
        assert!(matches!(
            integral("18446744073709551616"),
            Integral::TooLarge { negative: false }
        ));
        assert!(matches!(
            integral("1e999999999999999999999"),
            Integral::TooLarge { negative: false }
        ));
        assert!(matches!(integral("2.5"), Integral::Fraction));
        assert!(matches!(integral("1.0000000000000000001"), Integral::Fraction));
        assert!(matches!(integral("1e-400"), Integral::Fraction));
        assert!(matches!(
            integral("-3"),
            Integral::Value {
                negative: true,
                magnitude: 3
            }
        ));
        assert!(matches!(integral("0e5"), Integral::Value { magnitude: 0, .. }));
    }
}
