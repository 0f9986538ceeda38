//! Compare two arrays cell by cell (`rasterpack diff`): shape and dtype first, then every cell
//! as float64, both sides streaming in step (side A decodes on its own thread into a bounded
//! queue of 1 MiB pieces, side B compares as it decodes), so memory stays at the readers'
//! working sets whatever the arrays' size.
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
    queue: VecDeque<f64>,
    diff: Option<Diff>,
    /// Set when the shapes differ: the comparison stops after `begin`.
    stop: bool,
    values: Vec<f64>,
}

impl Comparer {
    fn next_a(&mut self) -> Result<f64> {
        loop {
            if let Some(v) = self.queue.pop_front() {
                return Ok(v);
            }
            match self.rx.recv() {
                Ok(Msg::Values(v)) => self.queue.extend(v),
                Ok(Msg::Begin(_)) => return Err(Error::usage("internal: side A began twice")),
                Err(_) => return Err(Error::usage("diff: side A ended before side B (its read failed)")),
            }
        }
    }

    fn compare(&mut self, bytes: &[u8], dtype: DType) -> Result<()> {
        let mut values = std::mem::take(&mut self.values);
        values.clear();
        decode_f64(dtype, bytes, &mut values);
        for &b in &values {
            let a = self.next_a()?;
            let d = self
                .diff
                .as_mut()
                .ok_or_else(|| Error::usage("internal: diff before begin"))?;
            let index = d.compared;
            d.compared += 1;
            if !self.tol.equal(a, b) {
                d.differing += 1;
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
        }
        self.values = values;
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
fn in_order(position: &mut u64, offset: u64, len: usize, dtype: Option<DType>) -> Result<DType> {
    if offset != *position {
        return Err(Error::usage(format!(
            "internal: diff got bytes at {offset} while at {position}"
        )));
    }
    *position += len as u64;
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
}
