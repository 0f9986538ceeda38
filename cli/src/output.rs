//! Running inspect/validate over many inputs and reporting: tables for people, one JSON
//! document for machines, exit codes per docs/cli.md.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use comfy_table::{presets, Attribute, Cell, Color, ColumnConstraint, ContentArrangement, Table, Width};
use rasterpack_common::{shown, Finding, Findings, Limits, Section, Severity};
use serde_json::{json, Map, Value};

use rasterpack::progress::Meter;
pub use rasterpack::report::{check, file_json, worst, FileResult, Mode, Outcome, SCHEMA_VERSION};

/// Inspect or validate one input. `label` names it on a progress bar, drawn (validate only)
/// when stderr is a terminal and the check takes more than about a second.
fn process(mode: &Mode, path: &Path, label: &str, limits: &Limits) -> FileResult {
    let meter = match mode {
        Mode::Validate { .. } => Meter::on_stderr(label),
        Mode::Inspect { .. } => None,
    };
    let result = check(mode, path, limits, meter.as_ref().map(Meter::progress));
    if let Some(meter) = meter {
        meter.finish();
    }
    result
}

/// Colour only on a terminal and never when NO_COLOR is set (<https://no-color.org>).
fn colour_enabled() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Inputs checked at once when a store prefix is listed and `--jobs` is not given: the work is
/// mostly waiting on the network, and each check stays within its own memory bound.
pub const PREFIX_JOBS: usize = 4;

/// Inspect or validate every input in `paths` and report on each in the order given. `jobs`
/// (`--jobs`) checks that many inputs at once; by default one at a time, or [`PREFIX_JOBS`]
/// when a store prefix is listed. Reports come out in input (listing) order whatever finishes
/// first.
pub fn run_reports(mode: Mode, paths: &[PathBuf], as_json: bool, quiet: bool, jobs: Option<usize>) -> Outcome {
    let limits = Limits::default();
    // A store URL ending in `/` stands for every object under it, one report each. A listing
    // that fails is reported as that URL's unreadable input.
    let mut expanded: Vec<PathBuf> = Vec::with_capacity(paths.len());
    let mut listed = false;
    for p in paths {
        match p.to_str().filter(|u| rasterpack_store::is_prefix(u)) {
            Some(url) => match rasterpack_store::list(url, &rasterpack::detect::store_options()) {
                Ok(urls) if !urls.is_empty() => {
                    listed = true;
                    expanded.extend(urls.into_iter().map(PathBuf::from))
                }
                _ => expanded.push(p.clone()),
            },
            None => expanded.push(p.clone()),
        }
    }
    let paths = &expanded[..];
    let style = TableStyle {
        colour: colour_enabled(),
        width: table_width(),
    };
    let progress = paths.len() > 1 && std::io::stderr().is_terminal();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut code = 0u8;
    let mut totals = Totals::new(&mode);
    let mut json_files = Vec::new();
    let jobs = jobs
        .unwrap_or(if listed { PREFIX_JOBS } else { 1 })
        .clamp(1, paths.len().max(1));
    let label_of = |i: usize, path: &Path| {
        if paths.len() > 1 {
            format!("[{}/{}] {}", i + 1, paths.len(), shown(path))
        } else {
            shown(path)
        }
    };
    let mut results = InOrder::new(&mode, paths, jobs, &limits);
    for (i, path) in paths.iter().enumerate() {
        let label = label_of(i, path);
        if progress {
            eprint!("\r\x1b[2K{label}");
        }
        let result = match results.next() {
            Some(r) => r,
            None => process(&mode, path, &label, &limits),
        };
        code = worst(code, result.exit_code);
        totals.count(result.exit_code);
        let unreadable = result.exit_code == 2;
        if unreadable {
            // An input that could not be read is reported once, on stderr (and in --json's
            // document, which must list every input); the text report does not repeat it.
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
        } else if !unreadable {
            let text = match mode {
                Mode::Inspect { .. } => render_inspect(&result, &style),
                Mode::Validate { .. } => render_validate(&result, &style),
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
    if !quiet {
        let written = if as_json {
            let doc = json!({ "schema_version": SCHEMA_VERSION, "files": json_files, "totals": totals.json() });
            serde_json::to_writer_pretty(&mut out, &doc)
                .map_err(std::io::Error::from)
                .and_then(|_| out.write_all(b"\n"))
        } else if paths.len() > 1 {
            out.write_all(format!("{}\n", totals.line()).as_bytes())
        } else {
            Ok(())
        };
        if let Err(e) = written {
            return write_failed(&e);
        }
    }
    if let Err(e) = out.flush() {
        return write_failed(&e);
    }
    Outcome::Code(code)
}

/// The results of checks run `jobs` at a time on worker threads, handed out in input order:
/// a report waits for the ones before it, so the output is the same whatever finishes first.
/// With one job nothing runs here and the caller checks each input itself (with its progress bar).
struct InOrder {
    rx: Option<std::sync::mpsc::Receiver<(usize, FileResult)>>,
    pending: std::collections::BTreeMap<usize, FileResult>,
    next: usize,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl InOrder {
    fn new(mode: &Mode, paths: &[PathBuf], jobs: usize, limits: &Limits) -> InOrder {
        let mut me = InOrder {
            rx: None,
            pending: Default::default(),
            next: 0,
            workers: Vec::new(),
        };
        if jobs <= 1 {
            return me;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let queue = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let paths: std::sync::Arc<Vec<PathBuf>> = std::sync::Arc::new(paths.to_vec());
        for _ in 0..jobs {
            let (tx, queue, paths, mode, limits) = (tx.clone(), queue.clone(), paths.clone(), *mode, *limits);
            me.workers.push(std::thread::spawn(move || loop {
                let i = queue.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = paths.get(i) else { return };
                // No progress bar per input: several would draw over each other.
                let result = check(&mode, path, &limits, None);
                if tx.send((i, result)).is_err() {
                    return;
                }
            }));
        }
        me.rx = Some(rx);
        me
    }

    /// The next input's result, waiting for it; `None` when checks are not run here.
    fn next(&mut self) -> Option<FileResult> {
        let rx = self.rx.as_ref()?;
        while !self.pending.contains_key(&self.next) {
            let (i, r) = rx.recv().ok()?;
            self.pending.insert(i, r);
        }
        let r = self.pending.remove(&self.next);
        self.next += 1;
        r
    }
}

impl Drop for InOrder {
    fn drop(&mut self) {
        // A report that could not be written ends the run early: let the workers see the
        // channel closed and stop after their current input.
        self.rx = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// How many inputs ended with each verdict. Exit code 0 is "valid" for validate and only
/// "structure checked" for inspect, which never says a file is valid.
#[derive(Debug, Default, PartialEq)]
struct Totals {
    /// Counted under inspect (`structure_checked`) rather than validate (`valid`).
    inspect: bool,
    passed: usize,
    invalid: usize,
    unsupported: usize,
    unreadable: usize,
}

impl Totals {
    fn new(mode: &Mode) -> Self {
        Totals {
            inspect: matches!(mode, Mode::Inspect { .. }),
            ..Default::default()
        }
    }

    fn count(&mut self, exit_code: u8) {
        match exit_code {
            0 => self.passed += 1,
            1 => self.invalid += 1,
            3 => self.unsupported += 1,
            _ => self.unreadable += 1,
        }
    }

    fn files(&self) -> usize {
        self.passed + self.invalid + self.unsupported + self.unreadable
    }

    fn passed_word(&self) -> &'static str {
        if self.inspect {
            "structure checked"
        } else {
            "valid"
        }
    }

    /// `12 files: 10 valid, 1 invalid, 1 unsupported` (verdicts no file got are left out).
    fn line(&self) -> String {
        let n = self.files();
        let mut parts = vec![format!("{} {}", self.passed, self.passed_word())];
        for (count, word) in [
            (self.invalid, "invalid"),
            (self.unsupported, "unsupported"),
            (self.unreadable, "unreadable"),
        ] {
            if count > 0 {
                parts.push(format!("{count} {word}"));
            }
        }
        format!("{n} file{}: {}", if n == 1 { "" } else { "s" }, parts.join(", "))
    }

    fn json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("files".into(), Value::from(self.files()));
        obj.insert(self.passed_word().replace(' ', "_"), Value::from(self.passed));
        obj.insert("invalid".into(), Value::from(self.invalid));
        obj.insert("unsupported".into(), Value::from(self.unsupported));
        obj.insert("unreadable".into(), Value::from(self.unreadable));
        Value::Object(obj)
    }
}

/// A report that could not be written: a closed pipe ends quietly, anything else is exit 2.
pub(crate) fn write_failed(e: &std::io::Error) -> Outcome {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Outcome::BrokenPipe
    } else {
        eprintln!("rasterpack: writing the report: {e}");
        Outcome::Code(2)
    }
}

/// How tables are drawn: colour or not, and the width to wrap to (`None`: never wrap).
pub struct TableStyle {
    pub colour: bool,
    pub width: Option<u16>,
}

/// Wrap to the terminal's width on a terminal; a terminal that reports no width (0, or
/// nothing) gets 80 columns. Piped output is never wrapped, so rows stay whole for grep.
fn table_width() -> Option<u16> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    match Table::new().width() {
        Some(w) if w > 0 => Some(w),
        _ => Some(80),
    }
}

/// Draw a table of `texts` (under `header` when given). Colour is comfy-table's own cell
/// styling, so escape codes never count as width. When wrapping, lines break at spaces, and
/// each column is kept at least as wide as its longest number, so numbers never split; the room
/// left keeps short words whole too, narrowest column first. A table with a header that cannot
/// fit that way is drawn one record at a time, as `header | value` rows.
fn table(header: Option<&[String]>, texts: &[Vec<String>], style: &TableStyle) -> String {
    table_with(header, texts, style, &|_, _, text| Cell::new(text))
}

/// [`table`] with a hook that makes each body cell from (row, column, shown text), for styling.
fn table_with(
    header: Option<&[String]>,
    texts: &[Vec<String>],
    style: &TableStyle,
    cell: &dyn Fn(usize, usize, String) -> Cell,
) -> String {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    if style.colour {
        // Colour was decided by the caller (a terminal, no NO_COLOR); widths are set explicitly.
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    if let Some(h) = header {
        t.set_header(h.iter().map(|h| {
            let c = Cell::new(h);
            if style.colour {
                c.add_attribute(Attribute::Bold)
            } else {
                c
            }
        }));
    }
    let Some(width) = style.width else {
        t.set_content_arrangement(ContentArrangement::Disabled);
        for (r, row) in texts.iter().enumerate() {
            t.add_row(row.iter().enumerate().map(|(c, text)| cell(r, c, text.clone())));
        }
        return t.to_string();
    };
    let shown: Vec<Vec<String>> = texts
        .iter()
        .map(|row| row.iter().map(|text| with_break_points(text)).collect())
        .collect();
    let header_texts = header.unwrap_or(&[]);
    let columns = shown
        .iter()
        .map(Vec::len)
        .chain([header_texts.len()])
        .max()
        .unwrap_or(0);
    let column_texts = |i: usize| shown.iter().filter_map(move |r| r.get(i)).chain(header_texts.get(i));
    let longest = |i: usize, numbers_only: bool| column_texts(i).map(|t| longest_word(t, numbers_only)).max();
    let numbers: Vec<usize> = (0..columns).map(|i| longest(i, true).unwrap_or(0)).collect();
    let words: Vec<usize> = (0..columns)
        .map(|i| longest(i, false).unwrap_or(0).min(MAX_KEPT_WORD))
        .collect();
    // Room for content: the width less the borders (columns + 1) and padding (2 a column).
    let room = usize::from(width).saturating_sub(columns + 1 + 2 * columns);
    let least: usize = (0..columns).map(|i| numbers[i].max(words[i].min(NARROWEST))).sum();
    if least > room && header.is_some() && columns > 2 {
        return records(header_texts, texts, style, cell);
    }
    t.set_width(width).set_content_arrangement(ContentArrangement::Dynamic);
    for (r, row) in shown.iter().enumerate() {
        t.add_row(row.iter().enumerate().map(|(c, text)| cell(r, c, text.clone())));
    }
    let mut lower = numbers.clone();
    let mut left = room.saturating_sub(lower.iter().sum::<usize>());
    let mut by_width: Vec<(usize, usize)> = words.iter().copied().zip(0..).collect();
    by_width.sort();
    for (want, i) in by_width {
        let extra = want.saturating_sub(lower[i]);
        if extra > left {
            break;
        }
        left -= extra;
        lower[i] = lower[i].max(want);
    }
    for (i, min) in lower.into_iter().enumerate() {
        if let (true, Some(c)) = (min > 0, t.column_mut(i)) {
            let min = u16::try_from(min + 2).unwrap_or(u16::MAX); // + left and right padding
            c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(min)));
        }
    }
    t.to_string()
}

/// A wide table drawn one record at a time: `header | value` rows, one box per record.
fn records(
    header: &[String],
    texts: &[Vec<String>],
    style: &TableStyle,
    cell: &dyn Fn(usize, usize, String) -> Cell,
) -> String {
    let mut out = Vec::new();
    for (r, row) in texts.iter().enumerate() {
        let pairs: Vec<Vec<String>> = row
            .iter()
            .enumerate()
            .map(|(c, text)| vec![header.get(c).cloned().unwrap_or_default(), text.clone()])
            .collect();
        // Row `column` of this box holds the record's cell of that column.
        out.push(table_with(None, &pairs, style, &|column, side, text| {
            if side == 1 {
                cell(r, column, text)
            } else {
                Cell::new(text)
            }
        }));
    }
    out.join("\n")
}

/// Words longer than this may be split when room is short (numbers never are).
const MAX_KEPT_WORD: usize = 24;
/// Below this width a column's words split so badly that a wide table is better drawn as
/// records.
const NARROWEST: usize = 6;

/// Long comma-joined words (JSON values, lists) get a space after each comma, so wrapping has
/// somewhere to break other than inside a number.
fn with_break_points(text: &str) -> String {
    if !text
        .split(' ')
        .any(|w| w.chars().count() > MAX_KEPT_WORD && w.contains(','))
    {
        return text.to_string();
    }
    text.split(' ')
        .map(|w| {
            if w.chars().count() > MAX_KEPT_WORD {
                w.replace(',', ", ").trim_end().to_string()
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Width of the longest space-separated word of `text` (only numbers when `numbers_only`);
/// 0 when there is none.
fn longest_word(text: &str, numbers_only: bool) -> usize {
    text.split([' ', '\n'])
        .filter(|word| !numbers_only || is_number(word))
        .map(|word| word.chars().count())
        .max()
        .unwrap_or(0)
}

/// A number, a range `a..b` or a comma-joined list of them, with brackets, quotes, a key
/// (`"bottom":1000,`) and punctuation around it: `-2147483647`, `0.99907`, `[850,700]`, `1e-3`.
fn is_number(word: &str) -> bool {
    let value = word.rsplit(':').next().unwrap_or(word);
    let inner = value.trim_matches(|c: char| "[](){}\"',;:".contains(c));
    !inner.is_empty()
        && (inner.chars().any(|c| c.is_ascii_digit()) || inner.parse::<f64>().is_ok())
        && inner
            .split(',')
            .flat_map(|n| n.split(".."))
            .all(|n| n.trim().parse::<f64>().is_ok())
}

fn paint(text: &str, ansi: &str, colour: bool) -> String {
    if colour {
        format!("\x1b[{ansi}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn render_section(s: &Section, style: &TableStyle, out: &mut String) {
    match s {
        Section::Fields { title, rows } => {
            let texts: Vec<Vec<String>> = rows.iter().map(|(k, v)| vec![k.clone(), v.clone()]).collect();
            out.push_str(&format!("{title}\n{}\n", table(None, &texts, style)));
        }
        Section::Table { title, headers, rows } => {
            out.push_str(&format!("{title}\n{}\n", table(Some(headers), rows, style)));
        }
        Section::Text { title, text } => {
            out.push_str(&format!("{title}\n{text}\n"));
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
    }
}

fn findings_table(findings: &[Finding], style: &TableStyle) -> String {
    let header = ["severity", "code", "offset", "message"].map(String::from);
    let texts: Vec<Vec<String>> = findings
        .iter()
        .map(|f| {
            vec![
                f.severity.as_str().to_string(),
                f.code.clone(),
                f.offset.map(|o| o.to_string()).unwrap_or_else(|| "-".into()),
                f.message.clone(),
            ]
        })
        .collect();
    let painted = |row: usize, column: usize, text: String| {
        let colour = match findings[row].severity {
            Severity::Error => Some(Color::Red),
            Severity::Warning => Some(Color::Yellow),
            Severity::Info => None,
        };
        match colour {
            Some(c) if column == 0 && style.colour => Cell::new(text).fg(c),
            _ => Cell::new(text),
        }
    };
    format!("{}\n", table_with(Some(&header), &texts, style, &painted))
}

fn verdict(r: &FileResult, colour: bool) -> String {
    match r.exit_code {
        0 => paint("VALID", "32", colour),
        1 => paint("INVALID", "31", colour),
        3 => paint("UNSUPPORTED", "35", colour),
        _ => paint("ERROR", "31", colour),
    }
}

/// The findings of one report by severity, counted ones included: ` (3 errors, 1 warning)`.
fn counts(findings: &Findings) -> String {
    let n = |s| findings.count(s);
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

/// One line per code whose findings past the cap were counted, not listed.
fn omitted_lines(findings: &Findings) -> String {
    findings
        .omitted()
        .iter()
        .map(|o| {
            format!(
                "{} more {} {} finding{} not listed ({} of each code are)\n",
                o.count,
                o.severity.as_str(),
                o.code,
                if o.count == 1 { "" } else { "s" },
                findings.cap()
            )
        })
        .collect()
}

fn render_validate(r: &FileResult, style: &TableStyle) -> String {
    let findings = r.report.findings.as_slice();
    let format = r.format.unwrap_or("?");
    let mut out = format!(
        "{}: {} [{format}]{}\n",
        shown(&r.path),
        verdict(r, style.colour),
        counts(&r.report.findings)
    );
    if !findings.is_empty() {
        out.push_str(&findings_table(findings, style));
    }
    out.push_str(&omitted_lines(&r.report.findings));
    out
}

fn render_inspect(r: &FileResult, style: &TableStyle) -> String {
    let format = r.format.unwrap_or("?");
    let mut out = paint(&format!("== {} [{format}] ==", shown(&r.path)), "1", style.colour);
    out.push('\n');
    for s in &r.report.sections {
        render_section(s, style, &mut out);
    }
    let findings = r.report.findings.as_slice();
    if !r.report.findings.is_empty() {
        out.push_str("Findings\n");
        out.push_str(&findings_table(findings, style));
        out.push_str(&omitted_lines(&r.report.findings));
    }
    // Errors found by the structural checks make a file invalid; their absence does not
    // make it valid: only validate says so.
    let status = match r.exit_code {
        0 => "structure checked".to_string(),
        _ => verdict(r, style.colour),
    };
    let mut last = format!("{}: {status}{}", shown(&r.path), counts(&r.report.findings));
    if r.exit_code == 0 {
        last.push_str(" (inspect checks the structure only; `rasterpack validate` checks everything)");
    }
    // Broken at spaces to the terminal's width (80 columns when not a terminal), so that a
    // terminal never wraps it mid-word.
    out.push_str(&wrap_words(&last, usize::from(style.width.unwrap_or(80))));
    out.push_str("\n\n");
    out
}

/// `text` broken at spaces into lines of at most `width` visible columns (escape sequences
/// count for none); a word longer than that keeps a line of its own, whole.
fn wrap_words(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut line = 0;
    for word in text.split(' ') {
        let n = visible_width(word);
        if line > 0 && line + 1 + n > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += n;
    }
    out
}

/// Characters of `text` a terminal shows: CSI escape sequences (colour) take no columns.
fn visible_width(text: &str) -> usize {
    let mut n = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Visible width of each line: escape sequences removed, characters counted.
    fn widths(text: &str) -> Vec<usize> {
        let mut out = Vec::new();
        for line in text.lines() {
            let mut n = 0;
            let mut chars = line.chars();
            while let Some(c) = chars.next() {
                if c == '\x1b' {
                    // CSI: ESC [ parameters final-byte
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                } else {
                    n += 1;
                }
            }
            out.push(n);
        }
        out
    }

    fn words(text: &str) -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || "│┆".contains(c))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn wrapping_breaks_at_spaces_only() {
        let text = "testdata/volp/temperature_4x32x32_int16.volp: structure checked (1 info) (inspect checks the structure only; `rasterpack validate` checks everything)";
        let wrapped = wrap_words(text, 80);
        assert_eq!(
            wrapped,
            "testdata/volp/temperature_4x32x32_int16.volp: structure checked (1 info)\n(inspect checks the structure only; `rasterpack validate` checks everything)"
        );
        assert_eq!(wrapped.replace('\n', " "), text);
        // Colour takes no columns; a word wider than the line stays whole.
        let red = format!("{} is {} now", "a".repeat(10), paint("INVALID", "31", true));
        assert_eq!(wrap_words(&red, 25), red);
        assert_eq!(wrap_words(&red, 24), red.replace(" now", "\nnow"));
        assert_eq!(wrap_words("aaaaaaaa bb", 4), "aaaaaaaa\nbb");
        assert_eq!(wrap_words("short", 80), "short");
    }

    #[test]
    fn numbers_are_recognised_with_their_punctuation() {
        for n in [
            "-2147483647",
            "0.9990717172622681",
            "1e-300",
            "[850,700]",
            "NaN",
            "-Infinity",
            "1,",
            "\"bottom\":1000,",
            "-2147483647..2147483647,",
        ] {
            assert!(is_number(n), "{n}");
        }
        for w in [
            "INTEGER",
            "a1",
            "2026-01-15T12:00:00Z",
            "4x5",
            "-",
            "volp.body.decompress",
            "[]",
        ] {
            assert!(!is_number(w), "{w}");
        }
    }

    #[test]
    fn tables_fit_80_columns_and_never_split_a_number() {
        let header: Vec<String> = ["", "min", "max", "note"].map(String::from).to_vec();
        let rows = vec![
            vec![
                "physical (stored * scale + offset)".to_string(),
                "-1234567.875".into(),
                "0.9990717172622681".into(),
                "a long note that has to wrap somewhere, at a space and nowhere else".into(),
            ],
            vec![
                "stored".into(),
                "-2147483647".into(),
                "2147483647".into(),
                "{\"west\":-10,\"south\":35,\"east\":30,\"north\":70,\"bottom\":1000,\"top\":250}".into(),
            ],
        ];
        for colour in [false, true] {
            let style = TableStyle {
                colour,
                width: Some(80),
            };
            let text = table(Some(&header), &rows, &style);
            let w = widths(&text);
            assert!(w.iter().all(|&n| n <= 80), "wider than 80:\n{text}");
            assert!(
                w.iter().all(|&n| n == w[0]),
                "rows misaligned (colour {colour}):\n{text}"
            );
            let shown = words(&text);
            for n in ["-1234567.875", "0.9990717172622681", "-2147483647", "2147483647"] {
                assert!(shown.iter().any(|w| w == n), "{n} was split:\n{text}");
            }
            // The JSON value wraps after its commas, not inside 1000.
            assert!(shown.iter().any(|w| w == "\"bottom\":1000,"), "{text}");
            // Colour is cell styling (escape codes around the word), never counted as width.
            assert_eq!(text.contains('\x1b'), colour, "{text}");
        }
    }

    #[test]
    fn numbers_inside_text_are_not_split_either() {
        // Without the lower bounds comfy-table splits 0.9990717172622681 and 0.6377824750677572
        // here, to share 80 columns evenly.
        let header: Vec<String> = ["what", "range", "mean", "note"].map(String::from).to_vec();
        let rows = vec![vec![
            "physical values (stored * scale + offset)".to_string(),
            "from -2147483647.125 to 2147483647.875 over all cells".into(),
            "0.9990717172622681 over 1700000000000 cells".into(),
            "the mean is 0.6377824750677572 and the sum 123456789012345".into(),
        ]];
        let text = table(
            Some(&header),
            &rows,
            &TableStyle {
                colour: false,
                width: Some(80),
            },
        );
        let w = widths(&text);
        assert!(w.iter().all(|&n| n == w[0] && n <= 80), "{text}");
        let shown = words(&text);
        for row in &rows {
            for n in row.iter().flat_map(|cell| cell.split(' ')).filter(|w| is_number(w)) {
                assert!(shown.iter().any(|w| w == n), "{n} was split:\n{text}");
            }
        }
    }

    #[test]
    fn coloured_findings_stay_aligned() {
        let findings = vec![
            Finding {
                severity: Severity::Error,
                code: "volp.body.decompress".into(),
                offset: Some(285),
                message: "zstd frame is corrupt or truncated: Src size is incorrect".into(),
            },
            Finding {
                severity: Severity::Warning,
                code: "volp.header.scale_invalid".into(),
                offset: None,
                message: "w".into(),
            },
        ];
        let style = TableStyle {
            colour: true,
            width: Some(80),
        };
        let text = findings_table(&findings, &style);
        let w = widths(text.trim_end());
        assert!(w.iter().all(|&n| n == w[0] && n <= 80), "{text}");
    }

    #[test]
    fn a_table_too_wide_for_the_terminal_is_drawn_as_records() {
        let header: Vec<String> = (0..10).map(|i| format!("column{i}")).collect();
        let rows = vec![(0..10)
            .map(|i| format!("{}", 1_000_000_000u64 * (i + 1)))
            .collect::<Vec<_>>()];
        let text = table(
            Some(&header),
            &rows,
            &TableStyle {
                colour: false,
                width: Some(80),
            },
        );
        assert!(widths(&text).iter().all(|&n| n <= 80), "{text}");
        assert!(text.contains("column9") && text.contains("10000000000"), "{text}");
        assert_eq!(text.lines().count(), 12, "one box, a line per column: {text}");
        // Piped (no width): one wide table, rows whole.
        let text = table(
            Some(&header),
            &rows,
            &TableStyle {
                colour: false,
                width: None,
            },
        );
        assert_eq!(text.lines().count(), 5, "{text}");
    }

    #[test]
    fn totals_name_each_verdict_that_occurred() {
        let mut t = Totals::new(&Mode::Validate { strict: false });
        for code in [0, 0, 1, 3, 2, 0] {
            t.count(code);
        }
        assert_eq!(t.line(), "6 files: 3 valid, 1 invalid, 1 unsupported, 1 unreadable");
        assert_eq!(
            t.json(),
            json!({"files": 6, "valid": 3, "invalid": 1, "unsupported": 1, "unreadable": 1})
        );
        // inspect makes no validity claim.
        let mut t = Totals::new(&Mode::Inspect { all: false });
        t.count(0);
        t.count(0);
        assert_eq!(t.line(), "2 files: 2 structure checked");
        assert_eq!(t.json()["structure_checked"], 2);
        assert!(t.json().get("valid").is_none());
    }

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
