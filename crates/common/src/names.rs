//! File names as messages show them.

use std::path::Path;

/// A path as messages and text reports show it: control characters escaped (`\n`, `\t`,
/// `\u{1b}`), so a name cannot move the cursor, clear the screen or fake a line of output, and
/// bytes that are not UTF-8 written as `\xNN`, so two different names never look alike. Every
/// place that echoes a path to a person goes through this one helper.
pub fn shown(path: &Path) -> String {
    let mut out = String::new();
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        for chunk in path.as_os_str().as_bytes().utf8_chunks() {
            push_escaped(&mut out, chunk.valid());
            for b in chunk.invalid() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    #[cfg(not(unix))]
    push_escaped(&mut out, &path.to_string_lossy());
    out
}

fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_stray_bytes_are_escaped() {
        assert_eq!(shown(Path::new("dir/cube.volp")), "dir/cube.volp");
        assert_eq!(
            shown(Path::new("a\nb\tc\u{1b}[2J\u{7f}\u{9b}")),
            "a\\nb\\tc\\u{1b}[2J\\u{7f}\\u{9b}"
        );
        assert_eq!(shown(Path::new("é")), "é");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let p = Path::new(std::ffi::OsStr::from_bytes(b"caf\xe9.npy"));
            assert_eq!(shown(p), "caf\\xe9.npy");
        }
    }
}
