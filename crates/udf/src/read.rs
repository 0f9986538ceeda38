//! The read path of one table: its bytes, or the bytes of a region of it, delivered to an
//! [`ArraySink`] as they are read from the input, with the content rules that protect them
//! checked on the way. Memory is a few MiB whatever the table's size.
//!
//! - A table without content rules streams only the runs of bytes the region covers.
//! - A table with content rules (text, INDEX, RANGE) streams the records the region meets
//!   (whole rows of a text list, whole range pairs, a scalar text whole), checked as they
//!   pass; the values outside those records are neither read nor judged.
//! - A compressed table decodes from the start of its stream up to the end of the region; a
//!   whole read decodes the whole stream and checks it holds exactly the shape.
//!
//! On a content error the sink has received part of the array: the caller discards it (the
//! CLI's temporary file, a [`rasterpack_common::MemorySink`]).

use rasterpack_common::stream::stream_stored_c_order;
use rasterpack_common::{ArraySink, DType, Error, Findings, Input, Region, RegionRuns, Result, Severity};

use crate::document::{UdfCompression, UdfDocument, UdfTable};
use crate::raw::Hint;
use crate::validate::{for_each_decoded, ContentCheck, Position, CHUNK};

/// An intact table about to be read: where its data is, what it holds.
pub(crate) struct TableSource<'a> {
    pub(crate) input: &'a Input,
    pub(crate) doc: &'a UdfDocument,
    pub(crate) table: &'a UdfTable,
    /// Absolute offset of the (stored or compressed) data.
    pub(crate) base: u64,
    pub(crate) dtype: DType,
    /// The array's full shape (C order).
    pub(crate) shape: &'a [u64],
    /// The table's `DATASET_PATH/TABLE`, for messages.
    pub(crate) path: &'a str,
}

impl TableSource<'_> {
    /// Deliver `region` of the table into `sink` (which has had `begin`).
    pub(crate) fn stream(&self, region: &Region, sink: &mut dyn ArraySink) -> Result<()> {
        if region.shape().iter().product::<u64>() == 0 {
            return Ok(());
        }
        let check = ContentCheck::new(self.doc, self.table, 0);
        self.announce(region, &check);
        match self.table.compression() {
            UdfCompression::SimpleU32 => self.stream_decoded(region, sink),
            _ if !check.is_nothing() => self.stream_checked(region, sink),
            _ => stream_stored_c_order(
                self.input,
                self.base,
                self.dtype,
                self.shape,
                Some(region),
                &mut |_| {},
                sink,
            ),
        }
    }

    /// Announce the stored bytes this read will take to a remote input (see
    /// [`Input::prefetch`]), so they come in a few large requests rather than one per piece:
    /// a compressed table's stream whole (decoded from its start), the records a checked read
    /// meets, or the span of the region's bytes when it is dense (at most 1.2x them; a
    /// sparse region is left to its own reads). Only a hint: every byte is still read and
    /// checked as before. Local inputs: nothing.
    fn announce(&self, region: &Region, check: &ContentCheck) {
        if !self.input.is_remote() {
            return;
        }
        let (start, end) = match self.table.compression() {
            UdfCompression::SimpleU32 => (0, self.table.data_size),
            _ if !check.is_nothing() => self.record_span(region),
            _ => {
                let elem = self.dtype.size() as u64;
                let (first, last) = span(self.shape, region, elem);
                let wanted = region.shape().iter().product::<u64>().saturating_mul(elem);
                if (last - first) > wanted.saturating_add(wanted / 5) {
                    return;
                }
                (first, last)
            }
        };
        if let (Some(a), Some(b)) = (self.base.checked_add(start), self.base.checked_add(end)) {
            self.input.prefetch(std::slice::from_ref(&(a..b)));
        }
    }

    /// The byte range of the table's (decoded) data the records met by `region` occupy.
    fn record_span(&self, region: &Region) -> (u64, u64) {
        let elem = self.dtype.size() as u64;
        let len = self.shape.iter().product::<u64>() * elem;
        let (first, last) = span(self.shape, region, elem);
        let t = self.table;
        let record = match t.hint {
            // A scalar text is one string.
            Hint::Text if t.shape.real().is_empty() => len,
            Hint::Text => t.shape.ghost().first().copied().unwrap_or(1).max(1) as u64 * elem,
            Hint::Range => 2 * elem,
            _ => elem,
        };
        let start = first / record * record;
        let end = last.div_ceil(record).saturating_mul(record).min(len);
        (start, end)
    }

    /// Stored data with content rules: the records the region meets, checked as they pass.
    fn stream_checked(&self, region: &Region, sink: &mut dyn ArraySink) -> Result<()> {
        let (start, end) = self.record_span(region);
        let mut check = ContentCheck::new(self.doc, self.table, start);
        let mut filter = RegionFilter::new(self.shape, region, self.dtype.size() as u64);
        let mut buf = vec![0u8; (CHUNK as u64).min(end - start) as usize];
        let mut pos = start;
        while pos < end && !check.settled() {
            let n = (buf.len() as u64).min(end - pos) as usize;
            self.input.read_at(self.base + pos, &mut buf[..n], "table data")?;
            check.feed(&buf[..n]);
            if !check.failed() {
                filter.push(pos, &buf[..n], sink)?;
            }
            pos += n as u64;
        }
        check.finish();
        self.refuse_on_findings(&check, Position::stored(self.base))
    }

    /// A compressed table: decoded from the start of its stream up to the region's end (the
    /// whole stream for a whole read, so its length is checked).
    fn stream_decoded(&self, region: &Region, sink: &mut dyn ArraySink) -> Result<()> {
        let (start, end) = self.record_span(region);
        let whole = end == self.table.decoded_len();
        let mut check = ContentCheck::new(self.doc, self.table, start);
        let mut filter = RegionFilter::new(self.shape, region, self.dtype.size() as u64);
        for_each_decoded(
            self.input,
            self.table,
            self.base,
            if whole { u64::MAX } else { end },
            |at, words| {
                let piece_end = at + words.len() as u64;
                let (a, b) = (at.max(start), piece_end.min(end));
                if a < b {
                    let part = &words[(a - at) as usize..(b - at) as usize];
                    check.feed(part);
                    if !check.failed() {
                        filter.push(a, part, sink)?;
                    }
                }
                Ok(whole || piece_end < end)
            },
            |_| {},
        )?;
        check.finish();
        self.refuse_on_findings(&check, Position::decoded(self.base))
    }

    /// The first content error as the read's error.
    fn refuse_on_findings(&self, check: &ContentCheck, position: Position) -> Result<()> {
        let mut f = Findings::new();
        check.findings(&format!("table {}", self.path), position, &mut f);
        let first = f.iter().find(|x| x.severity == Severity::Error).cloned();
        match first {
            Some(x) => Err(Error::invalid_at(x.code, x.offset, x.message)),
            None => Ok(()),
        }
    }
}

/// The byte range `[first, last)` of C-order data of `shape` from the first to the last value
/// of `region` (non-empty).
fn span(shape: &[u64], region: &Region, elem: u64) -> (u64, u64) {
    let mut first = 0u64;
    let mut last = 0u64;
    for (r, &d) in region.ranges.iter().zip(shape) {
        first = first * d + r.start;
        last = last * d + (r.end - 1);
    }
    (first * elem, (last + 1) * elem)
}

/// Takes the full data in ascending, contiguous pieces and writes the parts inside a region to
/// a sink at their offsets in the region's output.
struct RegionFilter {
    runs: RegionRuns,
    current: Option<(u64, u64)>,
    /// Output offset of the current run's first byte.
    out: u64,
}

impl RegionFilter {
    fn new(shape: &[u64], region: &Region, elem: u64) -> RegionFilter {
        let mut runs = RegionRuns::new(shape, region, elem);
        let current = runs.next();
        RegionFilter { runs, current, out: 0 }
    }

    /// The piece of the full data starting at byte `at`.
    fn push(&mut self, at: u64, bytes: &[u8], sink: &mut dyn ArraySink) -> Result<()> {
        let end = at + bytes.len() as u64;
        while let Some((start, len)) = self.current {
            if start >= end {
                return Ok(());
            }
            let run_end = start + len;
            let (a, b) = (start.max(at), run_end.min(end));
            if a < b {
                sink.write_at(self.out + (a - start), &bytes[(a - at) as usize..(b - at) as usize])?;
            }
            if run_end > end {
                return Ok(());
            }
            self.out += len;
            self.current = self.runs.next();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rasterpack_common::{ArrayInfo, Limits, MemorySink, NdArray};

    /// Pieces of every size through the filter give the region, as a direct slice does.
    #[test]
    fn filter_cuts_regions_from_pieces() {
        let shape = [3u64, 4, 5];
        let all = NdArray::from_vec(shape.to_vec(), (0..60u16).collect()).unwrap();
        for spec in ["", "1", "0:2,1:3,2:5", ":,2,:", "2,3,4", "0:3,0:4,1:2", "1:3"] {
            let region = if spec.is_empty() {
                Region::full(&shape)
            } else {
                Region::parse(spec, &shape).unwrap()
            };
            let (first, last) = span(&shape, &region, 2);
            for piece in [1usize, 2, 3, 7, 40, 120] {
                let mut sink = MemorySink::new(Limits::default());
                sink.begin(&ArrayInfo::new(DType::U16, region.shape())).unwrap();
                let mut filter = RegionFilter::new(&shape, &region, 2);
                let mut at = first as usize;
                while at < last as usize {
                    let end = (at + piece).min(last as usize);
                    filter.push(at as u64, &all.data[at..end], &mut sink).unwrap();
                    at = end;
                }
                assert_eq!(
                    sink.into_array().unwrap(),
                    all.region(&region).unwrap(),
                    "{spec} {piece}"
                );
            }
        }
    }
}
