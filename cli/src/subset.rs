//! `convert`'s subset flags: `--region` (numpy slices in the output's axis order) and the
//! spellings people know from each format, `--window` (GVRS, as `gdal_translate -srcwin`),
//! `--box` (VDS dimensions, fastest first) and `--levels` (VOLP). Each becomes one
//! [`RegionSpec`] in the output's `.npy` axis order, which the source resolves against its
//! array's shape and reads.

use rasterpack_common::stream::REGION_ERROR_CODE;
use rasterpack_common::{ArrayInfo, ArraySink, Error, ErrorKind, RegionSpec, Result};

use crate::args::ConvertArgs;

/// The subset asked for, and the flag it was spelled with (for messages).
#[derive(Debug, Clone, PartialEq)]
pub struct Subset {
    /// `--region`, `--window`, `--box` or `--levels`.
    pub flag: &'static str,
    /// The value as given.
    pub value: String,
    /// The box in the output's axis order.
    pub spec: RegionSpec,
}

/// The subset flag given on the command line (clap allows at most one), parsed.
pub fn from_args(args: &ConvertArgs) -> Result<Option<Subset>> {
    let given = [
        ("--region", &args.region),
        ("--window", &args.window),
        ("--box", &args.box_ranges),
        ("--levels", &args.levels),
    ];
    let Some((flag, value)) = given.into_iter().find_map(|(f, v)| v.as_ref().map(|v| (f, v))) else {
        return Ok(None);
    };
    let spec = parse(flag, value).map_err(|e| with_flag(flag, value, e))?;
    Ok(Some(Subset {
        flag,
        value: value.clone(),
        spec,
    }))
}

fn parse(flag: &str, value: &str) -> Result<RegionSpec> {
    match flag {
        "--window" => window(value),
        "--box" => {
            // VDS lists dimension 0 (the fastest) first; the output's axes go the other way.
            let mut spec = keep_axes(RegionSpec::parse(value)?)?;
            spec.axes.reverse();
            Ok(spec.for_every_axis())
        }
        "--levels" => {
            if value.contains(',') {
                return Err(Error::usage("give one range of levels, A:B (levels A to B-1) or A"));
            }
            keep_axes(RegionSpec::parse(value)?)
        }
        _ => RegionSpec::parse(value),
    }
}

/// `--box` and `--levels` are boxes in their formats' terms: an INDEX keeps its axis (one VDS
/// sample, one VOLP level) and steps are not theirs; only `--region` is numpy's.
fn keep_axes(mut spec: RegionSpec) -> Result<RegionSpec> {
    if spec.steps.iter().any(|&s| s != 1) {
        return Err(Error::usage("steps are for --region; give START:END ranges"));
    }
    if spec
        .axes
        .iter()
        .any(|&(a, b)| a.is_some_and(|v| v < 0) || b.is_some_and(|v| v < 0))
    {
        return Err(Error::usage("negative positions are for --region; count from 0"));
    }
    for (axis, index) in spec.index.iter_mut().enumerate() {
        if std::mem::take(index) {
            let (start, _) = spec.axes[axis];
            let start = start.unwrap_or(0);
            spec.axes[axis] = (Some(start), Some(start.saturating_add(1)));
        }
    }
    Ok(spec)
}

/// `ROW,COL,ROWS,COLS`: a window of a 2-D grid.
fn window(value: &str) -> Result<RegionSpec> {
    let numbers: Vec<u64> = value
        .split(',')
        .map(|n| n.trim().parse::<u64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::usage("expected four non-negative integers ROW,COL,ROWS,COLS"))?;
    let [row, col, rows, cols] = numbers[..] else {
        return Err(Error::usage("expected four numbers ROW,COL,ROWS,COLS"));
    };
    if rows == 0 || cols == 0 {
        return Err(Error::usage("ROWS and COLS must be at least 1"));
    }
    Ok(RegionSpec::from_start_size(&[row, col], &[rows, cols])?.for_every_axis())
}

/// A region error of the source (the box does not fit its array) rephrased for the flag the
/// user typed; other errors pass through.
pub fn explain(subset: &Subset, e: Error) -> Error {
    if e.kind != ErrorKind::Usage || e.code != REGION_ERROR_CODE {
        return e;
    }
    with_flag(subset.flag, &subset.value, e)
}

fn with_flag(flag: &str, value: &str, e: Error) -> Error {
    // Axis numbers in the message count in the output's order, which --box reverses.
    let rank = e.message.contains("ranges but the array has");
    let note = match flag {
        "--box" => "; --box lists VDS dimensions fastest first: its first range is the last axis of the output",
        "--window" if rank => "; --window cuts rows and columns of a 2-D array",
        _ => "",
    };
    Error::new(
        ErrorKind::Usage,
        e.code.clone(),
        None,
        format!("{flag} {value:?}: {}{note}", e.message),
    )
}

/// Passes an array on to `inner`, refusing at `begin` (before any data is written) a shape the
/// subset cannot give: a reader that ignored the region would otherwise write the whole array
/// as if it were the box asked for.
pub struct SubsetGuard<'s, S> {
    /// The sink the checked array goes to.
    pub inner: S,
    subset: &'s Subset,
    source: &'static str,
}

impl<'s, S: ArraySink> SubsetGuard<'s, S> {
    /// Check what `source` delivers against `subset`.
    pub fn new(inner: S, subset: &'s Subset, source: &'static str) -> Self {
        SubsetGuard { inner, subset, source }
    }
}

// The guard's check is at `begin`; the bytes pass unchanged, so everything else goes on as it is.
impl<S: ArraySink> rasterpack_common::SinkWrapper for SubsetGuard<'_, S> {
    type Inner = S;
    fn inner(&mut self) -> &mut S {
        &mut self.inner
    }
    fn inner_ref(&self) -> &S {
        &self.inner
    }
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        if !self.subset.spec.could_deliver(&info.shape) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "convert.region_ignored",
                None,
                format!(
                    "the {} reader delivered an array of shape {:?}, which is not the box {} {} asks for: \
                     it does not honour subsets yet",
                    self.source, info.shape, self.subset.flag, self.subset.value
                ),
            ));
        }
        self.inner.begin(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rasterpack_common::{DType, Limits, MemorySink};

    fn spec(flag: &str, value: &str) -> Result<RegionSpec> {
        parse(flag, value)
    }

    #[test]
    fn the_subset_guard_passes_every_hook_on() {
        use rasterpack_common::testkit::{assert_forwards, call_every_hook, HookProbe};
        let subset = Subset {
            flag: "--region",
            value: "1:3".into(),
            spec: spec("--region", "1:3").unwrap(),
        };
        let mut probe = HookProbe::default();
        call_every_hook(
            &mut SubsetGuard::new(&mut probe, &subset, "test"),
            &ArrayInfo::new(DType::U8, vec![2, 6]),
        );
        assert_forwards("SubsetGuard", &probe, &[]);
    }

    #[test]
    fn each_spelling_becomes_a_region_in_output_axis_order() {
        let shape = [8u64, 12, 20]; // a VDS of 20 samples x 12 crosslines x 8 inlines, as .npy
        let r = |flag, value| spec(flag, value).unwrap().resolve(&shape).map(|r| r.ranges);
        assert_eq!(r("--region", "1:3").unwrap(), vec![1..3, 0..12, 0..20]);
        // --box: dimension 0 (samples) first; the output reverses it.
        assert_eq!(r("--box", "0:10,:,2:6").unwrap(), vec![2..6, 0..12, 0..10]);
        assert_eq!(r("--box", "5,3:4,7").unwrap(), vec![7..8, 3..4, 5..6]);
        // Fewer ranges than dimensions would cut the wrong axes: refused.
        let e = r("--box", "0:10,:").unwrap_err();
        assert!(e.message.contains("gives 2 ranges but the array has 3 axes"), "{e}");
        assert_eq!(r("--levels", "2:5").unwrap(), vec![2..5, 0..12, 0..20]);
        assert_eq!(r("--levels", "7").unwrap(), vec![7..8, 0..12, 0..20]);
        assert!(spec("--levels", "1:2,3:4").is_err());
        // --window ROW,COL,ROWS,COLS on a 2-D grid; a 3-D array is refused.
        let w = spec("--window", "1,2,3,4").unwrap();
        assert_eq!(w.resolve(&[10, 10]).unwrap().ranges, vec![1..4, 2..6]);
        assert!(w.resolve(&shape).is_err());
        assert!(w.resolve(&[3, 10]).is_err(), "rows 1..4 run past 3");
        for bad in ["1,2,3", "1,2,3,4,5", "a,b,c,d", "1,2,0,4", "-1,0,1,1"] {
            assert!(spec("--window", bad).is_err(), "{bad}");
        }
        for bad in ["", "x", "1:2:0", "1:2:-1", "1:2:3:4", "a:2"] {
            assert!(spec("--region", bad).is_err(), "{bad:?}");
        }
        for bad in ["-1:2", "::2"] {
            assert!(spec("--box", bad).is_err(), "{bad:?}");
            assert!(spec("--levels", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn errors_name_the_flag() {
        let subset = Subset {
            flag: "--box",
            value: "0:99".into(),
            spec: spec("--box", "0:99").unwrap(),
        };
        let e = explain(&subset, subset.spec.resolve(&[4]).unwrap_err());
        assert!(e.message.starts_with("--box \"0:99\": "), "{e}");
        assert!(e.message.contains("fastest first"), "{e}");
        assert_eq!(e.kind, ErrorKind::Usage);
        // Errors that are not about the region pass through unchanged.
        let other = Error::invalid("volp.body.decompress", 12, "corrupt");
        assert_eq!(explain(&subset, other.clone()), other);
        assert_eq!(
            explain(&subset, Error::usage("no element x")),
            Error::usage("no element x")
        );
        // A value that does not parse names the flag too.
        let e = parse("--window", "1,2")
            .map_err(|e| with_flag("--window", "1,2", e))
            .unwrap_err();
        assert!(e.message.starts_with("--window \"1,2\": expected four numbers"), "{e}");
    }

    #[test]
    fn a_reader_that_ignores_the_region_is_caught_before_writing() {
        let s = |v: &str| RegionSpec::parse(v).unwrap();

        let subset = Subset {
            flag: "--levels",
            value: "0:2".into(),
            spec: s("0:2"),
        };
        let mut guard = SubsetGuard::new(MemorySink::new(Limits::default()), &subset, "test");
        let e = guard.begin(&ArrayInfo::new(DType::U8, vec![4, 3])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert!(e.message.contains("--levels 0:2"), "{e}");
        guard.begin(&ArrayInfo::new(DType::U8, vec![2, 3])).unwrap();
        guard.write_at(0, &[1, 2, 3, 4, 5, 6]).unwrap();
        guard.finish().unwrap();
        assert_eq!(guard.inner.into_array().unwrap().data, vec![1, 2, 3, 4, 5, 6]);
    }
}
