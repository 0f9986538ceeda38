//! Running inspect/validate over many inputs and reporting: tables for people, one JSON
//! document for machines, exit codes per docs/cli.md.

use std::io::{IsTerminal, Write};

use comfy_table::{presets, Attribute, Cell, ContentArrangement, Table};
use rasterpack_common::{
    Error, ErrorKind, Finding, InspectOptions, Limits, Report, Section, Severity, ValidateOptions,
};
use serde_json::{json, Map, Value};

use crate::detect;

pub enum Mode {
    Inspect { all: bool },
    Validate { strict: bool },
}

/// How the program ends.
pub enum Outcome {
    Code(u8),
    /// stdout was closed by the reader: end quietly with success.
    BrokenPipe,
}

/// One input's result.
pub struct FileResult {
    pub path: String,
    pub format: Option<&'static str>,
    pub report: Report,
    /// The verdict of `validate`; `None` for `inspect`, which makes only the cheap structural
    /// checks and so never claims a file is valid.
    pub valid: Option<bool>,
    pub exit_code: u8,
}

/// Exit code of a failed operation by error kind.
pub fn exit_code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Io | ErrorKind::Usage => 2,
        ErrorKind::Unsupported => 3,
        ErrorKind::Truncated | ErrorKind::Invalid | ErrorKind::LimitExceeded => 1,
    }
}

/// The worse of two exit codes in the order 2 > 3 > 1 > 0.
pub fn worst(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        2 => 3,
        3 => 2,
        1 => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

fn process(mode: &Mode, path: &str, limits: &Limits) -> FileResult {
    let full = matches!(mode, Mode::Validate { .. });
    let failed = |format: Option<&'static str>, err: Error| {
        let mut report = Report::new(format.unwrap_or(""));
        report.fail(&err);
        FileResult {
            path: path.to_string(),
            format,
            report,
            valid: full.then_some(false),
            exit_code: exit_code_for(err.kind),
        }
    };
    let input = match detect::open(path, limits) {
        Ok(i) => i,
        Err(e) => return failed(None, e),
    };
    let format = match detect::detect(&input) {
        Ok(f) => f,
        Err(e) => return failed(None, e),
    };
    let (report, strict) = match mode {
        Mode::Inspect { all } => {
            match format.inspect(
                &input,
                &InspectOptions {
                    all: *all,
                    limits: *limits,
                },
            ) {
                Ok(r) => (r, false),
                Err(e) => return failed(Some(format.name()), e.in_format(format.name())),
            }
        }
        Mode::Validate { strict } => (
            format.validate(
                &input,
                &ValidateOptions {
                    limits: *limits,
                    ..Default::default()
                },
            ),
            *strict,
        ),
    };
    let valid = report.is_valid(strict);
    let exit_code = if report.unsupported {
        3
    } else if !valid {
        1
    } else {
        0
    };
    FileResult {
        path: path.to_string(),
        format: Some(format.name()),
        report,
        valid: full.then_some(valid),
        exit_code,
    }
}

/// Colour only on a terminal and never when NO_COLOR is set (https://no-color.org).
fn colour_enabled() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

pub fn run_reports(mode: Mode, paths: &[String], as_json: bool, quiet: bool) -> Outcome {
    let limits = Limits::default();
    let colour = colour_enabled();
    let progress = paths.len() > 1 && std::io::stderr().is_terminal();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut code = 0u8;
    let mut json_files = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        if progress {
            eprint!("\r\x1b[2K[{}/{}] {path}", i + 1, paths.len());
        }
        let result = process(&mode, path, &limits);
        code = worst(code, result.exit_code);
        if result.exit_code == 2 {
            // Diagnostics for unreadable inputs go to stderr as well as into the report.
            if let Some(f) = result.report.findings.iter().next() {
                if progress {
                    eprint!("\r\x1b[2K");
                }
                eprintln!("rasterpack: {}", f.message);
            }
        }
        if quiet {
            continue;
        }
        if as_json {
            json_files.push(file_json(&result));
        } else {
            let text = match mode {
                Mode::Inspect { .. } => render_inspect(&result, colour),
                Mode::Validate { .. } => render_validate(&result, colour),
            };
            if progress {
                eprint!("\r\x1b[2K");
            }
            if let Err(e) = out.write_all(text.as_bytes()) {
                return write_failed(&e);
            }
        }
    }
    if progress {
        eprint!("\r\x1b[2K");
    }
    if as_json && !quiet {
        let doc = json!({ "schema_version": 1, "files": json_files });
        let res = serde_json::to_writer_pretty(&mut out, &doc).map_err(std::io::Error::from);
        if let Err(e) = res.and_then(|_| out.write_all(b"\n")) {
            return write_failed(&e);
        }
    }
    if let Err(e) = out.flush() {
        return write_failed(&e);
    }
    Outcome::Code(code)
}

fn write_failed(e: &std::io::Error) -> Outcome {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Outcome::BrokenPipe
    } else {
        eprintln!("rasterpack: writing the report: {e}");
        Outcome::Code(2)
    }
}

pub fn finding_json(f: &Finding) -> Value {
    json!({ "severity": f.severity.as_str(), "code": f.code, "offset": f.offset, "message": f.message })
}

fn file_json(r: &FileResult) -> Value {
    let mut obj = Map::new();
    obj.insert("path".into(), Value::from(r.path.clone()));
    obj.insert("format".into(), r.format.map(Value::from).unwrap_or(Value::Null));
    // inspect reports what it checked and no verdict; validate adds its verdict.
    match r.valid {
        Some(valid) => {
            obj.insert("checked".into(), Value::from("full"));
            obj.insert("valid".into(), Value::from(valid));
        }
        None => {
            obj.insert("checked".into(), Value::from("structure"));
        }
    }
    obj.insert("unsupported".into(), Value::from(r.report.unsupported));
    obj.insert("exit_code".into(), Value::from(r.exit_code));
    obj.insert(
        "findings".into(),
        Value::Array(r.report.findings.iter().map(finding_json).collect()),
    );
    obj.insert("summary".into(), Value::Object(r.report.summary.clone()));
    Value::Object(obj)
}

fn new_table(colour: bool) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if !colour {
        t.force_no_tty();
    }
    if !std::io::stdout().is_terminal() {
        // Without a terminal there is no width to wrap to: keep rows whole for grep.
        t.set_content_arrangement(ContentArrangement::Disabled);
    }
    t
}

fn header_cells(headers: &[String], colour: bool) -> Vec<Cell> {
    headers
        .iter()
        .map(|h| {
            let c = Cell::new(h);
            if colour {
                c.add_attribute(Attribute::Bold)
            } else {
                c
            }
        })
        .collect()
}

fn paint(text: &str, ansi: &str, colour: bool) -> String {
    if colour {
        format!("\x1b[{ansi}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn render_section(s: &Section, colour: bool, out: &mut String) {
    match s {
        Section::Fields { title, rows } => {
            out.push_str(&format!("{title}\n"));
            let mut t = new_table(colour);
            for (k, v) in rows {
                t.add_row(vec![Cell::new(k), Cell::new(v)]);
            }
            out.push_str(&format!("{t}\n"));
        }
        Section::Table { title, headers, rows } => {
            out.push_str(&format!("{title}\n"));
            let mut t = new_table(colour);
            t.set_header(header_cells(headers, colour));
            for r in rows {
                t.add_row(r.clone());
            }
            out.push_str(&format!("{t}\n"));
        }
        Section::Text { title, text } => {
            out.push_str(&format!("{title}\n{text}\n"));
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
    }
}

fn findings_table(findings: &[Finding], colour: bool) -> String {
    let mut t = new_table(colour);
    t.set_header(header_cells(
        &["severity".into(), "code".into(), "offset".into(), "message".into()],
        colour,
    ));
    for f in findings {
        let sev = match f.severity {
            Severity::Error => paint("error", "31", colour),
            Severity::Warning => paint("warning", "33", colour),
            Severity::Info => "info".to_string(),
        };
        t.add_row(vec![
            sev,
            f.code.clone(),
            f.offset.map(|o| o.to_string()).unwrap_or_else(|| "-".into()),
            f.message.clone(),
        ]);
    }
    format!("{t}\n")
}

fn verdict(r: &FileResult, colour: bool) -> String {
    match r.exit_code {
        0 => paint("VALID", "32", colour),
        1 => paint("INVALID", "31", colour),
        3 => paint("UNSUPPORTED", "35", colour),
        _ => paint("ERROR", "31", colour),
    }
}

fn counts(findings: &[Finding]) -> String {
    let n = |s| findings.iter().filter(|f| f.severity == s).count();
    let (e, w, i) = (n(Severity::Error), n(Severity::Warning), n(Severity::Info));
    let mut parts = Vec::new();
    for (count, word) in [(e, "error"), (w, "warning"), (i, "info")] {
        if count > 0 {
            parts.push(format!(
                "{count} {word}{}",
                if count == 1 || word == "info" { "" } else { "s" }
            ));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

fn render_validate(r: &FileResult, colour: bool) -> String {
    let findings: Vec<Finding> = r.report.findings.iter().cloned().collect();
    let format = r.format.unwrap_or("?");
    let mut out = format!("{}: {} [{format}]{}\n", r.path, verdict(r, colour), counts(&findings));
    if !findings.is_empty() {
        out.push_str(&findings_table(&findings, colour));
    }
    out
}

fn render_inspect(r: &FileResult, colour: bool) -> String {
    let format = r.format.unwrap_or("?");
    let mut out = paint(&format!("== {} [{format}] ==", r.path), "1", colour);
    out.push('\n');
    for s in &r.report.sections {
        render_section(s, colour, &mut out);
    }
    let findings: Vec<Finding> = r.report.findings.iter().cloned().collect();
    if !findings.is_empty() {
        out.push_str("Findings\n");
        out.push_str(&findings_table(&findings, colour));
    }
    // Errors found by the structural checks make a file invalid; their absence does not
    // make it valid: only validate says so.
    let status = match r.exit_code {
        0 => "structure checked".to_string(),
        _ => verdict(r, colour),
    };
    out.push_str(&format!("{}: {status}{}", r.path, counts(&findings)));
    if r.exit_code == 0 {
        out.push_str(" (inspect checks the structure only; `rasterpack validate` checks everything)");
    }
    out.push_str("\n\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_priority() {
        assert_eq!(worst(0, 1), 1);
        assert_eq!(worst(1, 3), 3);
        assert_eq!(worst(3, 1), 3);
        assert_eq!(worst(3, 2), 2);
        assert_eq!(worst(2, 0), 2);
        assert_eq!(worst(0, 0), 0);
    }
}
