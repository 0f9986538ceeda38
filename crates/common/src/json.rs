//! JSON helpers for reports: non-finite floats become the strings `"NaN"`, `"Infinity"`,
//! `"-Infinity"` (serde_json would silently write `null`).

use serde_json::Value;

/// An f64 as a JSON value, non-finite values as the CLI contract's strings.
pub fn f64_value(x: f64) -> Value {
    if x.is_nan() {
        Value::from("NaN")
    } else if x == f64::INFINITY {
        Value::from("Infinity")
    } else if x == f64::NEG_INFINITY {
        Value::from("-Infinity")
    } else {
        serde_json::Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// The inverse of [`f64_value`]: a JSON number, or one of the strings `"NaN"`, `"Infinity"`,
/// `"-Infinity"`, as an f64; anything else is `None`.
pub fn value_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) if s == "NaN" => Some(f64::NAN),
        Value::String(s) if s == "Infinity" => Some(f64::INFINITY),
        Value::String(s) if s == "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// Short human rendering of an f64 (shortest round-trip form).
pub fn fmt_f64(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        format!("{x:?}")
    }
}

/// Short human rendering of an f32: the shortest text that reads back as the same f32
/// (`245.76276`, where the f64 of it would print `245.7627563476562`).
pub fn fmt_f32(x: f32) -> String {
    if x.is_finite() {
        format!("{x:?}")
    } else {
        fmt_f64(x as f64)
    }
}

/// A value of an array of `dtype`, held in f64, at that array's own precision: the shortest
/// text that round-trips as an f32 for float32 (and float16) arrays, as an f64 otherwise. A
/// figure beyond f32's range (a sum, or a mean of extreme values) stays f64 rather than print
/// as infinity, and one that is not an f32 value at all (a mean, a difference) prints as the
/// nearest f32, which is all the array's precision says about it.
pub fn fmt_at(x: f64, dtype: crate::DType) -> String {
    match dtype {
        crate::DType::F32 | crate::DType::F16 if (x as f32).is_finite() || !x.is_finite() => fmt_f32(x as f32),
        _ => fmt_f64(x),
    }
}

/// A byte count for people: `1.5 MiB (1572864 bytes)`.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {} ({n} bytes)", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_become_strings() {
        assert_eq!(f64_value(f64::NAN), Value::from("NaN"));
        assert_eq!(f64_value(f64::NEG_INFINITY), Value::from("-Infinity"));
        for x in [1.5, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1e300] {
            assert_eq!(value_f64(&f64_value(x)).map(f64::to_bits), Some(x.to_bits()));
        }
        assert!(value_f64(&f64_value(f64::NAN)).is_some_and(f64::is_nan));
        assert_eq!(value_f64(&Value::from("inf")), None);
        assert_eq!(value_f64(&Value::Null), None);
        assert_eq!(f64_value(1.5), serde_json::json!(1.5));
        assert_eq!(fmt_bytes(1536), "1.5 KiB (1536 bytes)");
    }

    #[test]
    fn values_print_at_their_arrays_precision() {
        use crate::DType;
        // An f32 value held in f64 prints as the f32 it is, and reads back as that f32.
        let v = 245.762_75_f32 as f64;
        assert_eq!(fmt_f64(v), "245.76275634765625");
        assert_eq!(fmt_at(v, DType::F32), "245.76276");
        assert_eq!("245.76276".parse::<f32>().unwrap() as f64, v);
        assert_eq!(fmt_at(0.9990717172622681, DType::F32), "0.9990717");
        assert_eq!(fmt_at(0.1f32 as f64, DType::F16), "0.1");
        // f64 and integer arrays keep f64's shortest form.
        assert_eq!(fmt_at(245.76275146484375, DType::F64), "245.76275146484375");
        assert_eq!(fmt_at(0.1f32 as f64, DType::F64), "0.10000000149011612");
        assert_eq!(fmt_at(-5287.0, DType::I16), "-5287.0");
        // Beyond f32's range: f64, not inf; non-finite values as the contract spells them.
        assert_eq!(fmt_at(1e300, DType::F32), "1e300");
        assert_eq!(fmt_at(f64::NAN, DType::F32), "NaN");
        assert_eq!(fmt_at(f64::NEG_INFINITY, DType::F32), "-Infinity");
        assert_eq!(fmt_f32(f32::INFINITY), "Infinity");
    }
}
