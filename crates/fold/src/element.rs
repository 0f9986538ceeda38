//! What `--element` (an [`rasterpack_common::ArrayRequest::element`]) names in a FOLD file:
//! an array of an NPZ0 chunk, in one of three forms, most explicit first:
//! - `["CHUNK","ARRAY"]`, a JSON array of two strings: exactly that chunk and array (any
//!   names, `/` included);
//! - `CHUNK/ARRAY`: split at any `/` (chunk names may hold `/`, e.g. `a/b/v` is array `v` of
//!   chunk `a/b`, or array `b/v` of chunk `a`);
//! - `ARRAY`: an array name alone.
//!
//! Every meaning the value has in the file is collected; exactly one must exist. Lookups go
//! through hash maps: the work is linear in the chunks and arrays, not their product.

use std::collections::HashMap;

use rasterpack_common::{Error, ErrorKind, Result};

use crate::npz::NpzArrayInfo;
use crate::validate::FoldChunkStatus;

/// An NPZ0 chunk as `--element` sees it: its status, and its arrays when it could be read
/// (`None` when its checks failed: its errors say why).
pub struct NpzChunk<'a> {
    /// The chunk's status after its checks.
    pub status: &'a FoldChunkStatus,
    /// Its arrays, when the chunk could be read.
    pub arrays: Option<&'a [NpzArrayInfo]>,
}

impl NpzChunk<'_> {
    fn name(&self) -> &str {
        &self.status.entry.name
    }
}

/// The NPZ0 chunks among `statuses`, as `--element` sees them.
pub fn npz_chunks(statuses: &[FoldChunkStatus]) -> Vec<NpzChunk<'_>> {
    statuses
        .iter()
        .filter(|st| st.entry.ctype == "NPZ0")
        .map(|st| NpzChunk {
            status: st,
            arrays: match &st.content {
                crate::validate::FoldContent::Npz(arrays) if st.errors.is_empty() => Some(arrays.as_slice()),
                _ => None,
            },
        })
        .collect()
}

/// Chunks by name, and the array names of each readable chunk.
struct Lookup<'a> {
    by_name: HashMap<&'a str, Vec<usize>>,
    /// Whether each chunk could be read (its arrays are known).
    readable: Vec<bool>,
    /// Which readable chunks hold an array of each name: the first, then any others. One map
    /// for every chunk, and no allocation per name: a directory may list 350 000 members.
    holders: HashMap<&'a str, (usize, Vec<usize>)>,
}

impl<'a> Lookup<'a> {
    fn new(chunks: &'a [NpzChunk<'a>]) -> Lookup<'a> {
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut holders: HashMap<&str, (usize, Vec<usize>)> = HashMap::new();
        let mut readable = Vec::with_capacity(chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            by_name.entry(c.name()).or_default().push(i);
            readable.push(c.arrays.is_some());
            for a in c.arrays.unwrap_or(&[]) {
                holders
                    .entry(a.name.as_str())
                    .and_modify(|h| {
                        // A name twice in one chunk counts once (chunks come in order).
                        if h.0 != i && h.1.last() != Some(&i) {
                            h.1.push(i);
                        }
                    })
                    .or_insert((i, Vec::new()));
            }
        }
        Lookup {
            by_name,
            readable,
            holders,
        }
    }

    /// Chunk `i` can hold `array`: it does, or it could not be read.
    fn may_hold(&self, i: usize, array: &str) -> bool {
        !self.readable[i]
            || self
                .holders
                .get(array)
                .is_some_and(|(first, rest)| *first == i || rest.contains(&i))
    }

    fn meanings(&self, element: &str) -> Vec<(usize, String)> {
        if element.starts_with('[') {
            if let Ok([chunk, array]) = serde_json::from_str::<[String; 2]>(element) {
                return self
                    .by_name
                    .get(chunk.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|&&i| self.may_hold(i, &array))
                    .map(|&i| (i, array.clone()))
                    .collect();
            }
        }
        let mut out = Vec::new();
        for (at, _) in element.match_indices('/') {
            let (chunk, array) = (&element[..at], &element[at + 1..]);
            for &i in self.by_name.get(chunk).into_iter().flatten() {
                if self.may_hold(i, array) {
                    out.push((i, array.to_string()));
                }
            }
        }
        if let Some((first, rest)) = self.holders.get(element) {
            for &i in std::iter::once(first).chain(rest) {
                out.push((i, element.to_string()));
            }
        }
        out
    }
}

/// Every (chunk, array) pair `element` can mean in this file (see the module docs); a
/// readable chunk is named only with an array it holds, an unreadable chunk with whatever
/// array was asked.
pub fn element_meanings<'a>(chunks: &'a [NpzChunk<'a>], element: &str) -> Vec<(&'a NpzChunk<'a>, String)> {
    Lookup::new(chunks)
        .meanings(element)
        .into_iter()
        .map(|(i, a)| (&chunks[i], a))
        .collect()
}

/// How to name `array` of chunk `i` with `--element` in this file: `CHUNK/ARRAY` when that
/// means only this pair, else the explicit `["CHUNK","ARRAY"]`.
fn element_label(lookup: &Lookup, chunks: &[NpzChunk], i: usize, array: &str) -> String {
    let chunk = chunks[i].name();
    let plain = format!("{chunk}/{array}");
    let m = lookup.meanings(&plain);
    if m.len() == 1 && m[0].0 == i && m[0].1 == array {
        plain
    } else {
        serde_json::to_string(&[chunk, array]).unwrap_or(plain)
    }
}

/// The error of a chunk that failed its checks, for a read that needed it.
pub(crate) fn chunk_failure(c: &NpzChunk) -> Error {
    match c.status.errors.first() {
        Some(f) => Error::invalid_at(
            f.code.clone(),
            f.offset,
            format!("cannot read chunk {:?}: {}", c.name(), f.message),
        ),
        None => Error::invalid_at(
            "fold.payload.unreadable",
            Some(c.status.entry.offset),
            format!("chunk {:?} could not be decoded", c.name()),
        ),
    }
}

/// Pick the array `element` names (or the only one). Errors: usage (exit 2) for names that
/// mean nothing or several things; the chunk's own finding (exit 1) when the array lies in a
/// chunk that failed its checks.
pub fn pick_array<'a>(chunks: &'a [NpzChunk<'a>], element: Option<&str>) -> Result<(&'a NpzChunk<'a>, String)> {
    let lookup = Lookup::new(chunks);
    let readable: Vec<(usize, &NpzArrayInfo)> = chunks
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.arrays.unwrap_or(&[]).iter().map(move |a| (i, a)))
        .collect();
    let damaged: Vec<&NpzChunk> = chunks.iter().filter(|c| c.arrays.is_none()).collect();
    // Members that are damaged are named, but never chosen for want of an --element.
    let intact: Vec<(usize, &NpzArrayInfo)> = readable.iter().copied().filter(|(_, a)| a.damaged.is_none()).collect();
    let listing = || {
        // A directory may list 350 000 members: the message names the first ones.
        const NAMED: usize = 100;
        let mut names: Vec<String> = readable
            .iter()
            .take(NAMED)
            .map(|(i, a)| {
                let label = element_label(&lookup, chunks, *i, &a.name);
                if a.damaged.is_some() {
                    format!("{label} (damaged)")
                } else {
                    label
                }
            })
            .collect();
        if readable.len() > NAMED {
            names.push(format!("... and {} more", readable.len() - NAMED));
        }
        for c in &damaged {
            names.push(format!("{:?} (chunk could not be read)", c.name()));
        }
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    };
    let Some(el) = element else {
        return match (intact.as_slice(), damaged.as_slice()) {
            ([(i, a)], []) => Ok((&chunks[*i], a.name.clone())),
            ([], [one, ..]) => Err(chunk_failure(one)),
            ([], []) => match readable.first() {
                // Every array there is is damaged: say how.
                Some((i, a)) => Ok((&chunks[*i], a.name.clone())),
                None => Err(Error::usage("the file holds no NPZ0 array")),
            },
            _ => Err(Error::new(
                ErrorKind::Usage,
                "request.element_required",
                None,
                format!(
                    "the file holds several arrays; name the one to read as CHUNK/ARRAY: {}",
                    listing()
                ),
            )),
        };
    };
    let mut meanings = lookup.meanings(el);
    meanings.sort();
    meanings.dedup();
    match meanings.as_slice() {
        [(i, _)] if chunks[*i].arrays.is_none() => Err(chunk_failure(&chunks[*i])),
        [(i, array)] => Ok((&chunks[*i], array.clone())),
        [] => match damaged.first() {
            // The array may be in a chunk that cannot be read: say what failed.
            Some(one) if !el.starts_with('[') => Err(chunk_failure(one)),
            _ => Err(Error::usage(format!(
                "no NPZ0 array {el:?}; choose one of: {}",
                listing()
            ))),
        },
        several => {
            if several
                .iter()
                .all(|(i, _)| chunks[*i].name() == chunks[several[0].0].name())
            {
                if let Some(first) = several.iter().find(|(i, _)| several.iter().any(|(j, _)| j != i)) {
                    // One name shared by several index entries: the index is broken there.
                    return Err(chunk_failure(&chunks[first.0]));
                }
            }
            let options: Vec<String> = several
                .iter()
                .map(|(i, a)| serde_json::to_string(&[chunks[*i].name(), a.as_str()]).unwrap_or_default())
                .collect();
            Err(Error::new(
                ErrorKind::Usage,
                "request.element_ambiguous",
                None,
                format!(
                    "element {el:?} can mean {}; name one as [\"CHUNK\",\"ARRAY\"]",
                    options.join(" or ")
                ),
            ))
        }
    }
}

/// Every readable array of `chunks` with the name `--element` takes for it.
pub(crate) fn element_labels<'a>(chunks: &'a [NpzChunk<'a>]) -> Vec<(String, &'a NpzArrayInfo)> {
    element_labels_first(chunks, usize::MAX).0
}

/// The first `max` readable arrays of `chunks` with their `--element` names, and how many
/// readable arrays there are in all (reports list a bounded number).
pub(crate) fn element_labels_first<'a>(
    chunks: &'a [NpzChunk<'a>],
    max: usize,
) -> (Vec<(String, &'a NpzArrayInfo)>, usize) {
    let readable = |c: &NpzChunk| c.arrays.unwrap_or(&[]).iter().any(NpzArrayInfo::is_readable);
    if !chunks.iter().any(readable) {
        // Nothing to name: no lookup over every member (a directory of 350 000 damaged ones).
        return (Vec::new(), 0);
    }
    let lookup = Lookup::new(chunks);
    let mut total = 0;
    let mut out = Vec::new();
    for (i, a) in chunks
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.arrays.unwrap_or(&[]).iter().map(move |a| (i, a)))
        .filter(|(_, a)| a.is_readable())
    {
        total += 1;
        if out.len() < max {
            out.push((element_label(&lookup, chunks, i, &a.name), a));
        }
    }
    (out, total)
}
