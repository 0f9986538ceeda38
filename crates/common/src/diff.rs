//! Compare two arrays cell by cell (`rasterpack diff`): shape and dtype first, then every cell
//! as float64, both sides streaming in step (side A decodes on its own thread into a bounded
//! queue of 1 MiB pieces, side B compares as it decodes), so memory stays at the readers'
//! working sets whatever the arrays' size. A run of one value (`ArraySink::fill_at`: a grid of
//! fill) travels as one message and is compared against a run of the other side in O(1), so an
//! all-fill grid of 2^34 cells costs nothing per cell.
//!
//! Two cells are equal when both are NaN, or `|a - b| <= atol + rtol * |b|` as
//! `numpy.isclose(a, b, rtol, atol, equal_nan=True)` decides (infinities equal only themselves).
//! With the default `atol = rtol = 0` that is exact equality (`-0.0 == 0.0`).

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use serde_json::{json, Value};

use crate::array::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::json::f64_value;
use crate::stats::{decode_f64, require_real};
use crate::stream::{ArrayInfo, ArraySink};

/// Values per piece sent from side A to side B.
const PIECE: usize = 1 << 17;

/// Tolerances of the cell comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tolerance {
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance (relative to side B's value, as numpy's `isclose`).
    pub rtol: f64,
}

impl Tolerance {
    /// Whether `a` and `b` count as equal.
    pub fn equal(&self, a: f64, b: f64) -> bool {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && b.is_nan();
        }
        if a == b {
            return true;
        }
        if a.is_infinite() || b.is_infinite() {
            return false;
        }
        (a - b).abs() <= self.atol + self.rtol * b.abs()
    }
}

/// What the comparison found.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    /// dtype and shape of side A.
    pub a: (DType, Vec<u64>),
    /// dtype and shape of side B.
    pub b: (DType, Vec<u64>),
    /// Cells compared (0 when the shapes differ: no cell is compared then).
    pub compared: u64,
    /// Cells that differ beyond the tolerance.
    pub differing: u64,
    /// Largest `|a - b|` over the differing cells (`None` when none differ; infinite when a NaN
    /// or an infinity faces another value).
    pub max_abs: Option<f64>,
    /// Largest `|a - b| / |b|` over the differing cells.
    pub max_rel: Option<f64>,
    /// C-order index of the first differing cell.
    pub first: Option<Vec<u64>>,
}

impl Diff {
    /// Same shape, same dtype and no differing cell.
    pub fn equal(&self) -> bool {
        self.a == self.b && self.differing == 0
    }

    /// The report's JSON object.
    pub fn to_json(&self) -> Value {
        let opt = |v: Option<f64>| v.map(f64_value).unwrap_or(Value::Null);
        json!({
            "equal": self.equal(),
            "dtype_a": self.a.0.name(), "shape_a": self.a.1,
            "dtype_b": self.b.0.name(), "shape_b": self.b.1,
            "same_shape": self.a.1 == self.b.1,
            "same_dtype": self.a.0 == self.b.0,
            "compared": self.compared,
            "differing": self.differing,
            "max_abs_diff": opt(self.max_abs),
            "max_rel_diff": opt(self.max_rel),
            "first_difference": self.first,
        })
    }
}

enum Msg {
    Begin(ArrayInfo),
    Values(Vec<f64>),
    /// `count` cells of one value.
    Run(u64, f64),
}

/// Side A's cells not yet compared: a piece of values (from `at` on) or a run of one value.
enum Seg {
    Values(Vec<f64>, usize),
    Run(u64, f64),
}

/// The one value of a fill `pattern`, when the sink may take the run whole: `begin` has
/// given the dtype, no partial cell is pending, and the run is whole cells of that dtype.
fn run_value(dtype: Option<DType>, carry: &[u8], len: u64, pattern: &[u8]) -> Option<(DType, f64)> {
    let dtype = dtype?;
    let size = dtype.size();
    if pattern.len() != size || !carry.is_empty() || !len.is_multiple_of(size as u64) {
        return None;
    }
    let mut one = Vec::with_capacity(1);
    decode_f64(dtype, pattern, &mut one);
    one.first().map(|&v| (dtype, v))
}

/// Side A's sink: decodes to f64 and sends pieces to side B.
struct Sender {
    tx: SyncSender<Msg>,
    dtype: Option<DType>,
    carry: Vec<u8>,
    position: u64,
}

fn gone() -> Error {
    // Side B stopped (shapes differ, or its read failed): not an error of side A.
    Error::usage("diff: the other side stopped")
}

impl ArraySink for Sender {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        require_real(info.dtype, "diff")?;
        self.dtype = Some(info.dtype);
        let mut info = info.clone();
        info.attrs.clear();
        self.tx.send(Msg::Begin(info)).map_err(|_| gone())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let dtype = in_order(&mut self.position, offset, data.len(), self.dtype)?;
        let size = dtype.size();
        let mut bytes = std::mem::take(&mut self.carry);
        for piece in data.chunks(PIECE * size) {
            bytes.extend_from_slice(piece);
            let whole = bytes.len() / size * size;
            let mut values = Vec::with_capacity(whole / size);
            decode_f64(dtype, &bytes[..whole], &mut values);
            bytes.drain(..whole);
            self.tx.send(Msg::Values(values)).map_err(|_| gone())?;
        }
        self.carry = bytes;
        Ok(())
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        let Some((dtype, v)) = run_value(self.dtype, &self.carry, len, pattern) else {
            return crate::stream::fill_by_chunks(self, offset, len, pattern);
        };
        in_order(&mut self.position, offset, len, self.dtype)?;
        let count = len / dtype.size() as u64;
        if count > 0 {
            self.tx.send(Msg::Run(count, v)).map_err(|_| gone())?;
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Side B's sink: compares its cells with side A's, in order.
struct Comparer {
    rx: Receiver<Msg>,
    tol: Tolerance,
    dtype: Option<DType>,
    shape: Vec<u64>,
    carry: Vec<u8>,
    position: u64,
    queue: VecDeque<Seg>,
    diff: Option<Diff>,
    /// Set when the shapes differ: the comparison stops after `begin`.
    stop: bool,
    values: Vec<f64>,
}

impl Comparer {
    /// Side A's next segment, waiting for it when none is queued.
    fn front(&mut self) -> Result<&mut Seg> {
        while self.queue.is_empty() {
            // Empty pieces (a cell split across two writes) and runs are skipped.
            match self.rx.recv() {
                Ok(Msg::Values(v)) if !v.is_empty() => self.queue.push_back(Seg::Values(v, 0)),
                Ok(Msg::Run(n, v)) if n > 0 => self.queue.push_back(Seg::Run(n, v)),
                Ok(Msg::Values(_) | Msg::Run(..)) => {}
                Ok(Msg::Begin(_)) => return Err(Error::usage("internal: side A began twice")),
                Err(_) => return Err(Error::usage("diff: side A ended before side B (its read failed)")),
            }
        }
        self.queue
            .front_mut()
            .ok_or_else(|| Error::usage("internal: diff queue empty"))
    }

    /// Take up to `max` (> 0) of side A's next cells: a run of one value, or one value.
    fn take_a(&mut self, max: u64) -> Result<(u64, f64)> {
        let (taken, done) = match self.front()? {
            Seg::Run(n, v) => {
                let k = (*n).min(max);
                *n -= k;
                ((k, *v), *n == 0)
            }
            Seg::Values(values, at) => {
                let v = values.get(*at).copied().unwrap_or(f64::NAN);
                *at += 1;
                ((1, v), *at >= values.len())
            }
        };
        if done {
            self.queue.pop_front();
        }
        Ok(taken)
    }

    /// Record `n` cells in a row whose pairs are all `(a, b)`: one comparison for all of them.
    fn record(&mut self, n: u64, a: f64, b: f64) -> Result<()> {
        let d = self
            .diff
            .as_mut()
            .ok_or_else(|| Error::usage("internal: diff before begin"))?;
        let index = d.compared;
        d.compared += n;
        if !self.tol.equal(a, b) {
            d.differing += n;
            let abs = if a.is_nan() || b.is_nan() {
                f64::INFINITY
            } else {
                (a - b).abs()
            };
            let rel = abs / b.abs();
            d.max_abs = Some(d.max_abs.map_or(abs, |m| m.max(abs)));
            if !rel.is_nan() {
                d.max_rel = Some(d.max_rel.map_or(rel, |m| m.max(rel)));
            }
            if d.first.is_none() {
                d.first = Some(unravel(index, &self.shape));
            }
        }
        Ok(())
    }

    fn compare(&mut self, bytes: &[u8], dtype: DType) -> Result<()> {
        let mut values = std::mem::take(&mut self.values);
        values.clear();
        decode_f64(dtype, bytes, &mut values);
        for &b in &values {
            // Cell by cell: a run of side A is taken one cell at a time here.
            let (_, a) = self.take_a(1)?;
            self.record(1, a, b)?;
        }
        self.values = values;
        Ok(())
    }

    /// `count` cells of side B, all `b`: against side A's runs an overlap at a time, against
    /// its values cell by cell.
    fn compare_run(&mut self, mut count: u64, b: f64) -> Result<()> {
        while count > 0 {
            let (n, a) = self.take_a(count)?;
            self.record(n, a, b)?;
            count -= n;
        }
        Ok(())
    }
}

/// The C-order multi-index of flat index `i` in `shape`.
fn unravel(mut i: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx
}

/// Both sides take their pieces in order: check `offset` against the position reached, move it
/// on past the piece, and give the dtype `begin` announced.
fn in_order(position: &mut u64, offset: u64, len: impl TryInto<u64>, dtype: Option<DType>) -> Result<DType> {
    if offset != *position {
        return Err(Error::usage(format!(
            "internal: diff got bytes at {offset} while at {position}"
        )));
    }
    let len: u64 = len
        .try_into()
        .map_err(|_| Error::usage("internal: diff piece length"))?;
    *position = position
        .checked_add(len)
        .ok_or_else(|| Error::usage("internal: diff position overflows"))?;
    dtype.ok_or_else(|| Error::usage("internal: diff got data before begin"))
}

const STOPPED: &str = "diff.stopped";

impl ArraySink for Comparer {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        let a = match self.rx.recv() {
            Ok(Msg::Begin(a)) => a,
            _ => return Err(Error::usage("diff: side A ended before it began (its read failed)")),
        };
        require_real(info.dtype, "diff")?;
        self.dtype = Some(info.dtype);
        self.shape = info.shape.clone();
        self.diff = Some(Diff {
            a: (a.dtype, a.shape.clone()),
            b: (info.dtype, info.shape.clone()),
            compared: 0,
            differing: 0,
            max_abs: None,
            max_rel: None,
            first: None,
        });
        if a.shape != info.shape {
            self.stop = true;
            return Err(Error::new(ErrorKind::Usage, STOPPED, None, "shapes differ"));
        }
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let dtype = in_order(&mut self.position, offset, data.len(), self.dtype)?;
        let size = dtype.size();
        let mut data = data;
        if !self.carry.is_empty() {
            let n = (size - self.carry.len()).min(data.len());
            self.carry.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.carry.len() == size {
                let c = std::mem::take(&mut self.carry);
                self.compare(&c, dtype)?;
            }
        }
        let whole = data.len() / size * size;
        for part in data[..whole].chunks(PIECE * size) {
            self.compare(part, dtype)?;
        }
        self.carry.extend_from_slice(&data[whole..]);
        Ok(())
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        let Some((dtype, v)) = run_value(self.dtype, &self.carry, len, pattern) else {
            return crate::stream::fill_by_chunks(self, offset, len, pattern);
        };
        in_order(&mut self.position, offset, len, self.dtype)?;
        self.compare_run(len / dtype.size() as u64, v)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Compare the array `stream_a` delivers with the one `stream_b` delivers (each called once
/// with the sink to stream into; `stream_a` runs on a thread of its own). A read error of
/// either side is returned as is.
pub fn compare(
    stream_a: impl FnOnce(&mut dyn ArraySink) -> Result<()> + Send,
    stream_b: impl FnOnce(&mut dyn ArraySink) -> Result<()>,
    tol: Tolerance,
) -> Result<Diff> {
    let (tx, rx) = sync_channel(4);
    std::thread::scope(|scope| {
        let side_a = scope.spawn(move || {
            let mut sink = Sender {
                tx,
                dtype: None,
                carry: Vec::new(),
                position: 0,
            };
            stream_a(&mut sink)
        });
        let mut cmp = Comparer {
            rx,
            tol,
            dtype: None,
            shape: Vec::new(),
            carry: Vec::new(),
            position: 0,
            queue: VecDeque::new(),
            diff: None,
            stop: false,
            values: Vec::new(),
        };
        let result_b = stream_b(&mut cmp);
        // Unblock side A if B stopped early, then collect its verdict.
        let Comparer {
            rx, stop, diff, queue, ..
        } = cmp;
        let leftover = !queue.is_empty();
        let more = rx.try_recv().is_ok();
        drop(rx);
        let result_a = side_a
            .join()
            .unwrap_or_else(|_| Err(Error::usage("diff: side A's reader panicked")));
        match result_a {
            Err(e) if !(stop || result_b.is_err()) || e.message != gone().message => return Err(e),
            _ => {}
        }
        if let Err(e) = result_b {
            if !(stop && e.code == STOPPED) {
                return Err(e);
            }
        }
        let diff = diff.ok_or_else(|| Error::usage("diff: side B delivered no array"))?;
        if !stop && (leftover || more) {
            return Err(Error::usage("internal: side A delivered more cells than side B"));
        }
        Ok(diff)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::NdArray;

    fn feed(a: &NdArray) -> impl FnOnce(&mut dyn ArraySink) -> Result<()> + Send + '_ {
        move |sink| {
            sink.begin(&ArrayInfo::of(a))?;
            let mut at = 0;
            for p in a.data.chunks(5) {
                sink.write_at(at, p)?;
                at += p.len() as u64;
            }
            Ok(())
        }
    }

    #[test]
    fn one_cell_nan_placement_shape_and_dtype() {
        let a = NdArray::from_vec(vec![2, 3], vec![1.0f32, 2.0, f32::NAN, 4.0, 5.0, 6.0]).unwrap();
        let same = compare(feed(&a), feed(&a), Tolerance::default()).unwrap();
        assert!(same.equal(), "NaN equals NaN");
        let b = NdArray::from_vec(vec![2, 3], vec![1.0f32, 2.0, f32::NAN, 4.0, 5.5, 6.0]).unwrap();
        let d = compare(feed(&a), feed(&b), Tolerance::default()).unwrap();
        assert_eq!(
            (d.differing, d.first.clone(), d.max_abs),
            (1, Some(vec![1, 1]), Some(0.5))
        );
        assert_eq!(d.max_rel, Some(0.5 / 5.5));
        assert!(compare(feed(&a), feed(&b), Tolerance { atol: 0.5, rtol: 0.0 })
            .unwrap()
            .equal());
        let n = NdArray::from_vec(vec![2, 3], vec![1.0f32, f32::NAN, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let d = compare(feed(&a), feed(&n), Tolerance::default()).unwrap();
        assert_eq!((d.differing, d.first), (2, Some(vec![0, 1])));
        let s = NdArray::from_vec(vec![3, 2], vec![1.0f32, 2.0, f32::NAN, 4.0, 5.0, 6.0]).unwrap();
        let d = compare(feed(&a), feed(&s), Tolerance::default()).unwrap();
        assert!(!d.equal());
        assert_eq!(d.compared, 0);
        let f64s = NdArray::from_vec(vec![2, 3], vec![1.0f64, 2.0, f64::NAN, 4.0, 5.0, 6.0]).unwrap();
        let d = compare(feed(&a), feed(&f64s), Tolerance::default()).unwrap();
        assert!(!d.equal(), "dtypes differ");
        assert_eq!((d.compared, d.differing), (6, 0));
    }

    #[test]
    fn a_big_array_streams_in_step() {
        let v: Vec<u16> = (0..1_000_000u32).map(|i| (i % 65521) as u16).collect();
        let a = NdArray::from_vec(vec![1000, 1000], v.clone()).unwrap();
        let mut w = v;
        w[999_999] = 7;
        let b = NdArray::from_vec(vec![1000, 1000], w).unwrap();
        let d = compare(
            |sink| {
                sink.begin(&ArrayInfo::of(&a))?;
                sink.write_at(0, &a.data)
            },
            feed(&b),
            Tolerance::default(),
        )
        .unwrap();
        assert_eq!((d.compared, d.differing, d.first), (1_000_000, 1, Some(vec![999, 999])));
    }

    /// A piece of an f32 array as a source delivers it: values, or a run of one value.
    #[derive(Clone)]
    enum Part {
        Vals(Vec<f32>),
        Run(u64, f32),
    }

    fn parts(shape: Vec<u64>, parts: Vec<Part>) -> impl FnOnce(&mut dyn ArraySink) -> Result<()> + Send {
        move |sink| {
            sink.begin(&ArrayInfo::new(DType::F32, shape))?;
            let mut at = 0u64;
            for p in parts {
                match p {
                    Part::Vals(v) => {
                        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                        sink.write_at(at, &bytes)?;
                        at += bytes.len() as u64;
                    }
                    Part::Run(n, v) => {
                        sink.fill_at(at, n * 4, &v.to_le_bytes())?;
                        at += n * 4;
                    }
                }
            }
            Ok(())
        }
    }

    /// The cells `parts` stand for, written out.
    fn cells(parts: &[Part]) -> Vec<f32> {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Part::Vals(v) => out.extend_from_slice(v),
                Part::Run(n, v) => out.extend(std::iter::repeat_n(*v, *n as usize)),
            }
        }
        out
    }

    fn diff(shape: &[u64], a: &[Part], b: &[Part]) -> Diff {
        compare(
            parts(shape.to_vec(), a.to_vec()),
            parts(shape.to_vec(), b.to_vec()),
            Tolerance::default(),
        )
        .unwrap()
    }

    /// A naive reference: every cell written out and compared in one loop.
    fn by_cells(shape: &[u64], a: &[Part], b: &[Part]) -> (u64, u64, Option<f64>, Option<f64>, Option<Vec<u64>>) {
        let (a, b) = (cells(a), cells(b));
        let (mut differing, mut max_abs, mut max_rel, mut first) = (0, None::<f64>, None::<f64>, None);
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            let (x, y) = (x as f64, y as f64);
            if x == y || (x.is_nan() && y.is_nan()) {
                continue;
            }
            differing += 1;
            let abs = if x.is_nan() || y.is_nan() {
                f64::INFINITY
            } else {
                (x - y).abs()
            };
            max_abs = Some(max_abs.map_or(abs, |m| m.max(abs)));
            if !(abs / y.abs()).is_nan() {
                max_rel = Some(max_rel.map_or(abs / y.abs(), |m| m.max(abs / y.abs())));
            }
            first = first.or(Some(unravel(i as u64, shape)));
        }
        (a.len() as u64, differing, max_abs, max_rel, first)
    }

    fn figures(d: &Diff) -> (u64, u64, Option<f64>, Option<f64>, Option<Vec<u64>>) {
        (d.compared, d.differing, d.max_abs, d.max_rel, d.first.clone())
    }

    #[test]
    fn a_run_against_a_run_is_one_comparison() {
        use Part::*;
        let d = diff(&[10], &[Run(10, 1.0)], &[Run(10, 1.0)]);
        assert!(d.equal());
        assert_eq!(figures(&d), (10, 0, None, None, None));
        let d = diff(&[2, 5], &[Run(10, 1.0)], &[Run(10, 4.0)]);
        assert_eq!(figures(&d), (10, 10, Some(3.0), Some(0.75), Some(vec![0, 0])));
        // NaN faces NaN: equal; NaN faces a value: infinitely far.
        assert!(diff(&[4], &[Run(4, f32::NAN)], &[Run(4, f32::NAN)]).equal());
        let d = diff(&[4], &[Run(4, f32::NAN)], &[Run(4, 0.0)]);
        assert_eq!((d.differing, d.max_abs), (4, Some(f64::INFINITY)));
        // 2^40 cells of fill on each side (4 TiB as f32): no pass over the cells.
        let d = diff(&[1 << 20, 1 << 20], &[Run(1 << 40, -9.0)], &[Run(1 << 40, -9.0)]);
        assert_eq!((d.compared, d.differing), (1 << 40, 0));
        let d = diff(
            &[1 << 20, 1 << 20],
            &[Run(1 << 40, -9.0)],
            &[Run(3 << 20, -9.0), Run((1 << 40) - (3 << 20), 0.0)],
        );
        assert_eq!(
            figures(&d),
            (
                (1 << 40),
                (1 << 40) - (3 << 20),
                Some(9.0),
                Some(f64::INFINITY),
                Some(vec![3, 0])
            )
        );
    }

    #[test]
    fn runs_against_values_and_values_against_runs() {
        use Part::*;
        let a = [Run(6, 2.0)];
        let b = [Vals(vec![2.0, 2.0, 5.0, 2.0, 2.0, 1.0])];
        let d = diff(&[2, 3], &a, &b);
        assert_eq!(figures(&d), (6, 2, Some(3.0), Some(1.0), Some(vec![0, 2])));
        let d = diff(&[2, 3], &b, &a);
        assert_eq!(figures(&d), (6, 2, Some(3.0), Some(1.5), Some(vec![0, 2])));
        assert_eq!(figures(&d), by_cells(&[2, 3], &b, &a));
    }

    #[test]
    fn runs_split_at_different_places_give_the_figures_of_the_cells() {
        use Part::*;
        let shape = [4, 5];
        let a = vec![
            Run(3, 0.0),
            Vals(vec![1.0, 2.0]),
            Run(7, 0.0),
            Run(4, 0.0),
            Vals(vec![3.0, 4.0, 5.0, 6.0]),
        ];
        let b = vec![
            Run(2, 0.0),
            Run(1, 0.0),
            Vals(vec![1.0, 2.0, 0.0]),
            Run(9, 0.0),
            Run(3, 7.0),
            Vals(vec![6.0, 6.0]),
        ];
        assert_eq!(cells(&a).len(), 20);
        assert_eq!(cells(&b).len(), 20);
        let d = diff(&shape, &a, &b);
        // Cells 15 (0 vs 7), 16 (3 vs 7), 17 (4 vs 7), 18 (5 vs 6): 4 differ, the first at [3, 0].
        assert_eq!(figures(&d), (20, 4, Some(7.0), Some(1.0), Some(vec![3, 0])));
        assert_eq!(figures(&d), by_cells(&shape, &a, &b));
        let d = diff(&shape, &b, &a);
        assert_eq!(figures(&d), by_cells(&shape, &b, &a));
        // The same cells delivered as values only: the same figures.
        let plain = |p: &[Part]| vec![Vals(cells(p))];
        assert_eq!(
            figures(&diff(&shape, &plain(&a), &plain(&b))),
            figures(&diff(&shape, &a, &b))
        );
        // Side A ends short of side B: an error, not a silent pass.
        assert!(compare(
            parts(shape.to_vec(), vec![Run(19, 0.0)]),
            parts(shape.to_vec(), vec![Run(20, 0.0)]),
            Tolerance::default()
        )
        .is_err());
    }

    #[test]
    fn the_first_difference_is_the_first_cell_of_the_first_unequal_overlap() {
        use Part::*;
        let shape = [3, 4];
        let a = [Run(5, 0.0), Run(7, 1.0)];
        let b = [Run(12, 0.0)];
        let d = diff(&shape, &a, &b);
        assert_eq!((d.differing, d.first.clone()), (7, Some(vec![1, 1])));
        let b = [Run(8, 1.0), Vals(vec![1.0, 1.0, 1.0, 1.0])];
        let d = diff(&shape, &a, &b);
        assert_eq!(figures(&d), (12, 5, Some(1.0), Some(1.0), Some(vec![0, 0])));
        assert_eq!(figures(&d), by_cells(&shape, &a, &b));
    }
}
