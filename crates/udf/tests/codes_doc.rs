//! The finding-code table in docs/formats/udf.md matches `codes::CODES` (code, severity, corpus code).

use rasterpack_udf::codes::CODES;

#[test]
fn doc_table_matches_code_list() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/formats/udf.md");
    let doc = std::fs::read_to_string(path).unwrap();
    for (code, sev, side) in CODES {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{code}` |")))
            .unwrap_or_else(|| panic!("{code} missing from docs/formats/udf.md"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[2], sev.as_str(), "{code}");
        assert_eq!(cells[4], side.map(|s| format!("`{s}`")).unwrap_or_default(), "{code}");
    }
    let mut seen = std::collections::HashSet::new();
    for (code, ..) in CODES {
        assert!(seen.insert(code), "{code} listed twice");
    }
}
