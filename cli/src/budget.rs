//! What an output may cost, decided when the array's shape is known and before any of it is
//! written (docs/cli.md, "Output size"): an output more than 4096 times the bytes it is made
//! from and over 1 GiB needs `--allow-expansion` (a 2.8 KB GVRS declaring 2^31 x 10 cells asks
//! for 86 GB), and a `.npy` file, whose size is exactly its values', must fit the free space of
//! its filesystem.

use std::fs::File;
use std::path::Path;

use rasterpack_common::{byte_len, ArrayInfo, ArraySink, Error, ErrorKind, Result};

/// Outputs above this many bytes are checked against their source's size.
pub const EXPANSION_FLOOR: u64 = 1 << 30;
/// How many times the source's size an output over [`EXPANSION_FLOOR`] may be.
pub const EXPANSION_RATIO: u64 = 4096;

/// The checks of one conversion.
#[derive(Clone)]
pub struct Budget {
    /// Bytes the output is made from (the input file, or the files of a dataset directory).
    pub source_bytes: u64,
    pub allow_expansion: bool,
    /// Bytes free for an unprivileged user on the output's filesystem, with the folder named in
    /// messages; `None` for standard output, devices and FIFOs (nothing to measure).
    pub free: Option<(u64, String)>,
    /// Whether the target stores the values uncompressed, so that its size is known now.
    pub exact_size: bool,
}

impl Budget {
    /// Refuse `info`'s array before anything of it is written when it breaks a rule.
    pub fn check(&self, info: &ArrayInfo) -> Result<()> {
        // An array whose size overflows u64 is larger than any filesystem.
        let declared = byte_len(info.dtype, &info.shape).unwrap_or(u64::MAX);
        let ceiling = self.source_bytes.saturating_mul(EXPANSION_RATIO);
        if !self.allow_expansion && declared > EXPANSION_FLOOR && declared > ceiling {
            return Err(Error::new(
                ErrorKind::Usage,
                "output.expansion",
                None,
                format!(
                    "the output's values take {declared} bytes ({}, shape {:?} of {}), more than {EXPANSION_RATIO} \
                     times the {} bytes they are made from: pass --allow-expansion to write it",
                    human(declared),
                    info.shape,
                    info.dtype.name(),
                    self.source_bytes
                ),
            ));
        }
        if let (true, Some((free, dir))) = (self.exact_size, &self.free) {
            if declared > *free {
                return Err(Error::new(
                    ErrorKind::Io,
                    "output.no_space",
                    None,
                    format!(
                        "the output needs {declared} bytes ({}) but the filesystem of {dir} has {free} bytes ({}) \
                         free: nothing was written",
                        human(declared),
                        human(*free)
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if unit == "bytes" {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// Bytes an unprivileged user may still write on `file`'s filesystem (statvfs `f_bavail *
/// f_frsize`), or `None` where it cannot be asked.
pub fn free_space(file: &File) -> Option<u64> {
    #[cfg(unix)]
    {
        let st = rustix::fs::fstatvfs(file).ok()?;
        Some(st.f_bavail.saturating_mul(st.f_frsize))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

/// Bytes of the files under `dir` (an object-store dataset), at most 64 folders deep.
pub fn dir_bytes(dir: &Path) -> u64 {
    fn walk(dir: &Path, depth: u32) -> u64 {
        if depth > 64 {
            return 0;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut total = 0u64;
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let bytes = if meta.is_dir() {
                walk(&entry.path(), depth + 1)
            } else {
                meta.len()
            };
            total = total.saturating_add(bytes);
        }
        total
    }
    walk(dir, 0)
}

/// Passes everything through after [`Budget::check`] accepted the array at `begin`.
pub struct Checked<'a> {
    pub inner: &'a mut dyn ArraySink,
    pub budget: &'a Budget,
}

impl<'a> rasterpack_common::SinkWrapper for Checked<'a> {
    type Inner = dyn ArraySink + 'a;
    fn inner(&mut self) -> &mut (dyn ArraySink + 'a) {
        self.inner
    }
    fn inner_ref(&self) -> &(dyn ArraySink + 'a) {
        self.inner
    }
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.budget.check(info)?;
        self.inner.begin(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rasterpack_common::DType;

    fn budget(source_bytes: u64, allow_expansion: bool, free: Option<u64>) -> Budget {
        Budget {
            source_bytes,
            allow_expansion,
            free: free.map(|f| (f, "/out".into())),
            exact_size: true,
        }
    }

    #[test]
    fn the_budget_check_passes_every_hook_on() {
        use rasterpack_common::testkit::{assert_forwards, call_every_hook, HookProbe};
        let mut probe = HookProbe::default();
        let b = budget(1 << 20, false, None);
        let mut checked = Checked {
            inner: &mut probe,
            budget: &b,
        };
        call_every_hook(&mut checked, &ArrayInfo::new(DType::U8, vec![4, 6]));
        assert_forwards("Checked", &probe, &[]);
    }

    #[test]
    fn expansion_needs_the_flag_past_both_bounds() {
        let big = ArrayInfo::new(DType::F32, vec![2_147_483_647, 10]);
        let e = budget(2816, false, None).check(&big).unwrap_err();
        assert_eq!(e.code, "output.expansion");
        assert!(
            e.message.contains("--allow-expansion") && e.message.contains("85899345880"),
            "{e}"
        );
        budget(2816, true, None).check(&big).unwrap();
        // Under 1 GiB any ratio is fine; over it, up to 4096 times the source.
        budget(1, false, None)
            .check(&ArrayInfo::new(DType::U8, vec![1 << 30]))
            .unwrap();
        budget(1 << 20, false, None)
            .check(&ArrayInfo::new(DType::U8, vec![4 << 30]))
            .unwrap();
        assert!(budget(1 << 20, false, None)
            .check(&ArrayInfo::new(DType::U8, vec![(4 << 30) + 1]))
            .is_err());
        // A shape whose size overflows is refused, not wrapped.
        assert!(budget(u64::MAX, false, Some(1 << 40))
            .check(&ArrayInfo::new(DType::F64, vec![u64::MAX, 4]))
            .is_err());
    }

    #[test]
    fn free_space_names_both_sizes() {
        let info = ArrayInfo::new(DType::U8, vec![1000]);
        let e = budget(1000, false, Some(999)).check(&info).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(
            e.message.contains("1000 bytes") && e.message.contains("999 bytes"),
            "{e}"
        );
        budget(1000, false, Some(1000)).check(&info).unwrap();
        // Compressed targets: their size is not known before writing.
        let mut b = budget(1000, false, Some(1));
        b.exact_size = false;
        b.check(&info).unwrap();
    }
}
