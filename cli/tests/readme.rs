//! The README's tour runs from a clone (issue 22): every command of the README's shell blocks
//! is run against the built binary, in a scratch folder holding a copy of `testdata/` and
//! nothing else, so a command that names a file the repository does not have (and no earlier
//! line of the same block made) fails here. Each command must exit 0 unless its comment says
//! `exit N`. Commands on a bucket or URL, and commands of other tools (`cargo install`, `just`,
//! `pip`), are named as skipped; `cargo run -p rasterpack -- ARGS` runs as `rasterpack ARGS`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_rasterpack");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn note(what: &str) {
    // Straight to stderr, so the note shows in a plain `cargo test` run.
    let _ = writeln!(std::io::stderr(), "{what}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The lines of each fenced block whose language is a shell.
fn shell_blocks(markdown: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    // Inside a fence: `Some(lines)` for a shell block, `None` for any other.
    let mut open: Option<Option<Vec<String>>> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (open.take(), fence) {
            (None, Some(lang)) => {
                let shell = ["sh", "bash", "shell"].contains(&lang.trim());
                open = Some(shell.then(Vec::new));
            }
            (None, None) => {}
            (Some(block), Some(_)) => blocks.extend(block),
            (Some(mut block), None) => {
                if let Some(lines) = &mut block {
                    lines.push(line.to_string());
                }
                open = Some(block);
            }
        }
    }
    blocks
}

/// A command and its trailing comment (`cmd   # comment`); the `#` of a comment follows
/// whitespace, so `'.files[]'` or a `#` inside a word stays in the command.
fn split_comment(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    for i in 0..bytes.len() {
        if bytes[i] == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()) {
            return (line[..i].trim(), line[i + 1..].trim());
        }
    }
    (line.trim(), "")
}

/// `exit N` in the comment: the exit code the README promises (0 when it says none).
fn expected_exit(comment: &str) -> i32 {
    comment
        .match_indices("exit ")
        .filter_map(|(i, _)| comment[i + 5..].chars().next()?.to_digit(10))
        .next()
        .map(|d| d as i32)
        .unwrap_or(0)
}

/// Why a command is not run here, or `None` to run it.
fn skip_reason(command: &str) -> Option<String> {
    let first = command.split_whitespace().next().unwrap_or_default();
    if first != "rasterpack" {
        return Some(format!("`{first}` is not the rasterpack binary"));
    }
    for scheme in ["s3://", "gs://", "az://", "http://", "https://"] {
        if command.contains(scheme) {
            return Some(format!("needs a network ({scheme} URL)"));
        }
    }
    if command.contains("| jq") && Command::new("jq").arg("--version").output().is_err() {
        return Some("jq is not installed".into());
    }
    None
}

#[test]
fn readme_shell_blocks_run_from_a_clone() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let blocks = shell_blocks(&readme);
    assert!(blocks.len() >= 4, "README shell blocks: {blocks:?}");
    let bin_dir = Path::new(EXE).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let (mut ran, mut skipped, mut failures) = (0, 0, Vec::new());
    for (b, block) in blocks.iter().enumerate() {
        // A fresh copy of testdata/ per block: each block stands alone.
        let dir = std::env::temp_dir().join(format!("rasterpack-readme-{}-{b}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&repo().join("testdata"), &dir.join("testdata"));
        for line in block {
            let (command, comment) = split_comment(line);
            if command.is_empty() {
                continue;
            }
            // The first steps build and run the CLI through cargo: the same command here.
            let command = match command.strip_prefix("cargo run -p rasterpack -- ") {
                Some(args) => format!("rasterpack {args}"),
                None => command.to_string(),
            };
            if let Some(why) = skip_reason(&command) {
                note(&format!("skipped: README `{command}`: {why}"));
                skipped += 1;
                continue;
            }
            let out = Command::new("bash")
                .args(["-o", "pipefail", "-c", &command])
                .current_dir(&dir)
                .env("PATH", &path)
                .env("NO_COLOR", "1")
                .output()
                .unwrap();
            ran += 1;
            let want = expected_exit(comment);
            if out.status.code() != Some(want) {
                failures.push(format!(
                    "`{command}`: exit {:?}, the README says {want}\n{}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The tour is most of the README: a parser that found nothing to run is a broken test.
    assert!(ran >= 20, "{ran} README commands ran ({skipped} skipped)");
}

#[test]
fn the_parser_reads_commands_comments_and_exit_codes() {
    let md = "text\n```sh\na x  # one\n\n# only a comment\nb '.x[]' | jq  # exit 1: broken\n```\n```rust\nfn f() {}\n```\n```\nplain\n```\n```bash\nc\n```\n";
    let blocks = shell_blocks(md);
    assert_eq!(
        blocks,
        vec![
            vec![
                "a x  # one".to_string(),
                String::new(),
                "# only a comment".into(),
                "b '.x[]' | jq  # exit 1: broken".into()
            ],
            vec!["c".to_string()]
        ]
    );
    assert_eq!(split_comment("a x  # one"), ("a x", "one"));
    assert_eq!(split_comment("# only a comment"), ("", "only a comment"));
    assert_eq!(split_comment("b a#b"), ("b a#b", ""));
    assert_eq!(expected_exit("two are broken on purpose: exit 1"), 1);
    assert_eq!(expected_exit("exit code only (0 valid, 1 invalid)"), 0);
    assert_eq!(expected_exit(""), 0);
    assert!(skip_reason("rasterpack convert s3://b/x.volp x.npy").is_some());
    assert!(skip_reason("cargo install --locked --path cli").is_some());
    assert!(skip_reason("rasterpack inspect testdata/udf/sample.udf").is_none());
}
