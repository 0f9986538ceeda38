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
        assert_eq!(f64_value(1.5), serde_json::json!(1.5));
        assert_eq!(fmt_bytes(1536), "1.5 KiB (1536 bytes)");
    }
}
