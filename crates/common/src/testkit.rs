//! Support for the workspace's own tests and fuzz targets (not part of the API): finding the
//! reference corpus, and the numbers of JSON headers set to their extremes.
//!
//! Interop tests read reference-written files from `$RASTERPACK_CORPUS/<format>`. Unset means
//! "not available here": the test is skipped, and says so in the normal `cargo test` output.
//! Set but empty or pointing nowhere is a mistake in the command, so it fails loudly instead of
//! quietly testing nothing.

use std::io::Write;
use std::path::PathBuf;

/// The environment variable naming the corpus folder.
pub const CORPUS_VAR: &str = "RASTERPACK_CORPUS";

/// `$RASTERPACK_CORPUS/<sub>` (or the corpus folder itself when `sub` is empty).
///
/// - unset: `None`, after writing `skipped: <test> needs corpus/<sub> (RASTERPACK_CORPUS not
///   set)` to stderr;
/// - set but empty, or the folder (or `sub` inside it) missing: panics with a message naming
///   the variable and the path.
///
/// The skip note is written to `std::io::stderr()` directly: libtest captures only the
/// `print!`/`eprint!` family, so this line shows in a plain `cargo test` run, not only under
/// `--nocapture`.
pub fn corpus_dir(sub: &str) -> Option<PathBuf> {
    let Some(value) = std::env::var_os(CORPUS_VAR) else {
        let what = if sub.is_empty() {
            "the corpus".to_string()
        } else {
            format!("corpus/{sub}")
        };
        skip(&format!("needs {what} ({CORPUS_VAR} not set)"));
        return None;
    };
    if value.is_empty() {
        panic!(
            "{CORPUS_VAR} is set but empty: point it at the corpus folder (an absolute path, e.g. \
             $(realpath ../shared/corpus)) or unset it to skip the interop tests"
        );
    }
    let root = PathBuf::from(&value);
    if !root.is_dir() {
        panic!(
            "{CORPUS_VAR}={} is not a folder: point it at the corpus (an absolute path; cargo runs \
             each test in its crate's folder) or unset it to skip the interop tests",
            root.display()
        );
    }
    let dir = if sub.is_empty() { root } else { root.join(sub) };
    if !dir.is_dir() {
        panic!("{CORPUS_VAR} is set but {} is missing", dir.display());
    }
    Some(dir)
}

/// Number tokens that break arithmetic on declared values: zero, -1, the i32/i64/u64 limits
/// and their neighbours, 2^31, 2^32, 2^53 (where f64 stops counting), huge and out-of-range
/// floats, fractions. `1e400` is out of f64's range (serde_json rejects it: a parse error, not
/// a number).
pub const EXTREME_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9007199254740992",
    "9007199254740993",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "-1e308",
    "1e400",
    "0.5",
    "-0.5",
    "2.5",
    "1e-320",
];

/// Byte ranges of the number tokens of a JSON text (outside strings), in order.
pub fn json_number_spans(text: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    let (mut i, mut in_str) = (0usize, false);
    while i < text.len() {
        let c = text[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
            i += 1;
        } else if c == b'"' {
            in_str = true;
            i += 1;
        } else if c == b'-' || c.is_ascii_digit() {
            let start = i;
            i += 1;
            while i < text.len() && matches!(text[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                i += 1;
            }
            spans.push(start..i);
        } else {
            i += 1;
        }
    }
    spans
}

/// `text` with its number token `span` replaced by `token`.
pub fn replace_json_number(text: &[u8], span: std::ops::Range<usize>, token: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + token.len());
    out.extend_from_slice(&text[..span.start]);
    out.extend_from_slice(token.as_bytes());
    out.extend_from_slice(&text[span.end..]);
    out
}

/// Say that the running test skips its checks, and why: writes `skipped: <test> <why>` to
/// `std::io::stderr()` directly, so the line shows in a plain `cargo test` run (libtest
/// captures only the `print!`/`eprint!` family, which a passing run hides). The caller then
/// returns.
pub fn skip(why: &str) {
    // libtest names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let _ = writeln!(std::io::stderr(), "skipped: {test} {why}");
}

/// The folder named by the environment variable `var` for a test that needs data made outside
/// the repository (e.g. by a reference implementation), described by `what`.
///
/// - unset: `None`, after writing `skipped: <test> needs <what> (<var> not set)` to stderr (as
///   [`corpus_dir`] does), unless the environment variable `CI` is `true`: then it panics, so a
///   CI run cannot pass with the test skipped;
/// - set but empty or not a folder: panics naming the variable.
pub fn env_dir(var: &str, what: &str) -> Option<PathBuf> {
    let Some(value) = std::env::var_os(var) else {
        if std::env::var_os("CI").is_some_and(|v| v == "true") {
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("a test");
            panic!("{test} needs {what}: {var} is not set, and CI=true does not allow the skip");
        }
        skip(&format!("needs {what} ({var} not set)"));
        return None;
    };
    let dir = PathBuf::from(&value);
    if value.is_empty() || !dir.is_dir() {
        panic!(
            "{var}={} is not a folder: point it at {what} or unset it to skip",
            dir.display()
        );
    }
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_numbers_are_found_outside_strings() {
        let t = br#"{"a": -12, "b": "3 \" 4", "c": [1.5e3, 0], "d7": true}"#;
        let spans = json_number_spans(t);
        let toks: Vec<&[u8]> = spans.iter().map(|s| &t[s.clone()]).collect();
        assert_eq!(toks, [&b"-12"[..], b"1.5e3", b"0"]);
        let m = replace_json_number(t, spans[1].clone(), "1e400");
        assert_eq!(m, br#"{"a": -12, "b": "3 \" 4", "c": [1e400, 0], "d7": true}"#);
    }

    // One test touches the process environment, so no other test here races with it.
    #[test]
    fn unset_skips_empty_or_missing_panics() {
        let saved = std::env::var_os(CORPUS_VAR);
        std::env::remove_var(CORPUS_VAR);
        assert_eq!(corpus_dir("volp"), None);

        std::env::set_var(CORPUS_VAR, "");
        let msg = std::panic::catch_unwind(|| corpus_dir("volp")).unwrap_err();
        assert!(msg.downcast_ref::<String>().unwrap().contains("set but empty"));

        std::env::set_var(CORPUS_VAR, "/nonexistent/rasterpack-corpus");
        let msg = std::panic::catch_unwind(|| corpus_dir("volp")).unwrap_err();
        assert!(msg.downcast_ref::<String>().unwrap().contains("is not a folder"));

        let dir = std::env::temp_dir().join(format!("rp-testkit-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("volp")).unwrap();
        std::env::set_var(CORPUS_VAR, &dir);
        assert_eq!(corpus_dir("volp"), Some(dir.join("volp")));
        assert_eq!(corpus_dir(""), Some(dir.clone()));
        let msg = std::panic::catch_unwind(|| corpus_dir("gvrs")).unwrap_err();
        assert!(msg.downcast_ref::<String>().unwrap().contains("gvrs is missing"));
        std::fs::remove_dir_all(&dir).unwrap();

        match saved {
            Some(v) => std::env::set_var(CORPUS_VAR, v),
            None => std::env::remove_var(CORPUS_VAR),
        }

        // env_dir: unset skips, except under CI=true; set to a non-folder panics.
        const VAR: &str = "RASTERPACK_TESTKIT_PROBE";
        let saved_ci = std::env::var_os("CI");
        std::env::remove_var(VAR);
        std::env::set_var("CI", "false");
        assert_eq!(env_dir(VAR, "probe data"), None);
        std::env::set_var("CI", "true");
        let msg = std::panic::catch_unwind(|| env_dir(VAR, "probe data")).unwrap_err();
        assert!(msg.downcast_ref::<String>().unwrap().contains("CI=true"));
        std::env::set_var(VAR, "/nonexistent/rasterpack-probe");
        let msg = std::panic::catch_unwind(|| env_dir(VAR, "probe data")).unwrap_err();
        assert!(msg.downcast_ref::<String>().unwrap().contains("is not a folder"));
        let here = std::env::temp_dir();
        std::env::set_var(VAR, &here);
        assert_eq!(env_dir(VAR, "probe data"), Some(here));
        std::env::remove_var(VAR);
        match saved_ci {
            Some(v) => std::env::set_var("CI", v),
            None => std::env::remove_var("CI"),
        }
    }
}

/// Every hook of [`crate::ArraySink`], in the order [`call_every_hook`] calls them: what a
/// [`HookProbe`] behind a pass-through wrapper ([`crate::SinkWrapper`]) should see, less the
/// hooks that wrapper deliberately answers itself.
pub const SINK_HOOKS: [&str; 13] = [
    "takes_blocks",
    "blocks_before_begin",
    "begin",
    "random_access",
    "write_at",
    "fill_at",
    "direct_buffer",
    "direct_buffer_polled",
    "interrupt",
    "parallel_file",
    "parallel_blocks",
    "written_elsewhere",
    "finish",
];

/// A sink that records which of its hooks were called, answering each with what no default
/// gives (random access, a buffer, a parallel file and block sink, an interrupt check, an
/// accepted `written_elsewhere`): put behind a wrapper, it shows which hooks the wrapper
/// passes on. Nothing is written anywhere.
#[derive(Debug, Default)]
pub struct HookProbe {
    called: std::cell::RefCell<Vec<&'static str>>,
    buf: Vec<u8>,
}

impl HookProbe {
    /// The hooks called so far, in order, each once however often it was called.
    pub fn called(&self) -> Vec<&'static str> {
        self.called.borrow().clone()
    }

    fn saw(&self, hook: &'static str) {
        let mut called = self.called.borrow_mut();
        if !called.contains(&hook) {
            called.push(hook);
        }
    }
}

struct NoBlocks;

impl crate::BlockSink for NoBlocks {
    fn block(&self, _seq: u64, _data: &[u8]) -> crate::Result<()> {
        Ok(())
    }
    fn fill(&self, _seq: u64, _cells: u64, _pattern: &[u8]) -> crate::Result<()> {
        Ok(())
    }
}

// Every hook answered here, none left to the trait's default (`cargo clippy` refuses a hook
// added to `ArraySink` and not here), so a wrapper's default can never pass for forwarding.
#[deny(clippy::missing_trait_methods)]
impl crate::ArraySink for HookProbe {
    fn begin(&mut self, info: &crate::ArrayInfo) -> crate::Result<()> {
        self.saw("begin");
        self.buf = vec![0; info.byte_len()?.min(1 << 20) as usize];
        Ok(())
    }
    fn random_access(&self) -> bool {
        self.saw("random_access");
        true
    }
    fn write_at(&mut self, _offset: u64, _data: &[u8]) -> crate::Result<()> {
        self.saw("write_at");
        Ok(())
    }
    fn fill_at(&mut self, _offset: u64, _len: u64, _pattern: &[u8]) -> crate::Result<()> {
        self.saw("fill_at");
        Ok(())
    }
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        self.saw("direct_buffer");
        Some(&mut self.buf)
    }
    fn direct_buffer_polled(&mut self) -> Option<&mut [u8]> {
        self.saw("direct_buffer_polled");
        Some(&mut self.buf)
    }
    fn interrupt(&self) -> Option<crate::Interrupt> {
        self.saw("interrupt");
        Some(std::sync::Arc::new(|| Ok(())))
    }
    fn parallel_file(&mut self) -> Option<crate::ParallelFile> {
        self.saw("parallel_file");
        // Any open file does: the handle is only duplicated, never written through.
        let exe = std::env::current_exe().ok()?;
        let file = std::fs::File::open(exe).ok()?;
        crate::ParallelFile::new(&file, 0, self.buf.len() as u64).ok()
    }
    fn parallel_blocks(&mut self) -> Option<crate::ParallelBlocks> {
        self.saw("parallel_blocks");
        Some(std::sync::Arc::new(NoBlocks))
    }
    fn takes_blocks(&self) -> bool {
        self.saw("takes_blocks");
        true
    }
    fn blocks_before_begin(&mut self, _info: &crate::ArrayInfo) -> Option<crate::ParallelBlocks> {
        self.saw("blocks_before_begin");
        Some(std::sync::Arc::new(NoBlocks))
    }
    fn written_elsewhere(&mut self, _len: u64) -> crate::Result<()> {
        self.saw("written_elsewhere");
        Ok(())
    }
    fn finish(&mut self) -> crate::Result<()> {
        self.saw("finish");
        Ok(())
    }
}

/// Call each hook of `sink` once, in the order of [`SINK_HOOKS`], as a source and its caller
/// would: `begin` with `info`, one value written and one filled at offset 0, `len` of one
/// value reported written elsewhere, then `finish`. What the hooks answer is not looked at (a
/// wrapper may refuse some): a [`HookProbe`] behind `sink` records which ones reached it.
pub fn call_every_hook(sink: &mut dyn crate::ArraySink, info: &crate::ArrayInfo) {
    let value = vec![0u8; info.dtype.size()];
    let _ = sink.takes_blocks();
    let _ = sink.blocks_before_begin(info);
    let _ = sink.begin(info);
    let _ = sink.random_access();
    let _ = sink.write_at(0, &value);
    let _ = sink.fill_at(0, value.len() as u64, &value);
    let _ = sink.direct_buffer();
    let _ = sink.direct_buffer_polled();
    let _ = sink.interrupt();
    let _ = sink.parallel_file();
    let _ = sink.parallel_blocks();
    let _ = sink.written_elsewhere(value.len() as u64);
    let _ = sink.finish();
}

/// The hooks of [`SINK_HOOKS`] a [`HookProbe`] saw, checked against the list less `kept`
/// (the hooks the wrapper under test answers itself): panics naming `wrapper` and the hooks
/// it stopped passing on, or passes on though it says it keeps them.
pub fn assert_forwards(wrapper: &str, probe: &HookProbe, kept: &[&str]) {
    let want: Vec<&str> = SINK_HOOKS.iter().copied().filter(|h| !kept.contains(h)).collect();
    let mut seen = probe.called();
    seen.sort_by_key(|h| SINK_HOOKS.iter().position(|s| s == h));
    let lost: Vec<&str> = want.iter().copied().filter(|h| !seen.contains(h)).collect();
    let leaked: Vec<&str> = seen.iter().copied().filter(|h| !want.contains(h)).collect();
    assert!(
        lost.is_empty() && leaked.is_empty(),
        "{wrapper}: does not pass on {lost:?}; passes on {leaked:?}, which it should answer itself"
    );
}
