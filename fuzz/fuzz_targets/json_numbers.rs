#![no_main]
//! The numbers of JSON headers set to their extremes (0, -1, the i32/i64/u64 limits, 2^31,
//! 2^53, 1e308, 1e400, fractions; or any i64 the input spells), then validate and read: no
//! arithmetic on a declared number may overflow (the target builds with overflow checks on),
//! panic or exhaust memory. The first input byte picks the document: the VDS
//! `VolumeDataLayout` or `LayerStatus` of a small generated object-store dataset (held in
//! memory), the VOLP header of `testdata/volp/cloud_2x8x8_float32.volp`, or the FOLD index of
//! `testdata/fold/sample.fold`; then each 3 bytes set one number (u16 index among the
//! document's numbers, u8 choice of the extreme, past the list the next 8 bytes as an i64).
use std::collections::HashMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rasterpack_common::testkit::{json_number_spans, replace_json_number, EXTREME_NUMBERS};
use rasterpack_common::{ArrayRequest, Findings, Format, Input, Limits, Result, ValidateOptions};
use rasterpack_vds_meta::store::ObjectStore;
use rasterpack_vds_meta::testsupport::{sample_data, write_dir, Spec};
use rasterpack_vds_meta::{layout::VdsCompression, VdsDataset};

const VOLP: &[u8] = include_bytes!("../../testdata/volp/cloud_2x8x8_float32.volp");
const FOLD: &[u8] = include_bytes!("../../testdata/fold/sample.fold");

/// An object-store dataset held in memory.
struct MemStore(HashMap<String, Vec<u8>>);

impl ObjectStore for MemStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(key).cloned())
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut v: Vec<String> = self.0.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
        v.sort();
        Ok(v)
    }
    fn kind(&self) -> &'static str {
        "object-dir"
    }
}

/// The objects of a small RLE dataset with margins, written once by the test-support writer.
fn vds_objects() -> &'static HashMap<String, Vec<u8>> {
    static OBJECTS: OnceLock<HashMap<String, Vec<u8>>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rasterpack-fuzz-json-numbers-{}", std::process::id()));
        let spec = Spec {
            dims: vec![40, 9, 5],
            negative_margin: 1,
            positive_margin: 1,
            compression: VdsCompression::RLE,
            page_entries: 2,
            ..Default::default()
        };
        write_dir(&spec, &sample_data(&spec, 1), &dir).expect("write the seed dataset");
        let mut map = HashMap::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("list") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let key = p
                        .strip_prefix(&dir)
                        .expect("inside")
                        .to_string_lossy()
                        .replace('\\', "/");
                    map.insert(key, std::fs::read(&p).expect("read"));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
        map
    })
}

/// `text` with numbers replaced as `ops` says.
fn mutate(text: &[u8], ops: &[u8]) -> Vec<u8> {
    let mut out = text.to_vec();
    let mut rest = ops;
    for _ in 0..4 {
        let [a, b, c, tail @ ..] = rest else { break };
        rest = tail;
        let spans = json_number_spans(&out);
        if spans.is_empty() {
            break;
        }
        let span = spans[usize::from(u16::from_le_bytes([*a, *b])) % spans.len()].clone();
        let token = match EXTREME_NUMBERS.get(usize::from(*c)) {
            Some(t) => t.to_string(),
            None => {
                let mut v = [0u8; 8];
                let n = rest.len().min(8);
                v[..n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
                i64::from_le_bytes(v).to_string()
            }
        };
        out = replace_json_number(&out, span, &token);
    }
    out
}

fn limits() -> Limits {
    Limits {
        max_alloc: 64 << 20,
        max_array_bytes: 64 << 20,
        max_entries: 1 << 20,
        ..Limits::default()
    }
}

fn run_vds(key: &str, ops: &[u8]) {
    let mut objects = vds_objects().clone();
    let Some(text) = objects.get(key) else { return };
    let mutated = mutate(text, ops);
    objects.insert(key.to_string(), mutated);
    let limits = limits();
    let Ok(ds) = VdsDataset::open_store(Box::new(MemStore(objects)), None, Findings::new(), &limits) else {
        return;
    };
    let _ = ds.validate_with(&ValidateOptions {
        limits,
        ..Default::default()
    });
    for physical in [false, true] {
        let _ = ds.read(&ArrayRequest {
            limits,
            physical,
            ..Default::default()
        });
    }
}

fn run_format(format: &dyn Format, bytes: Vec<u8>) {
    let limits = limits();
    let input = Input::from_bytes("fuzz", bytes);
    let _ = format.validate(
        &input,
        &ValidateOptions {
            limits,
            ..Default::default()
        },
    );
    for physical in [false, true] {
        let _ = format.read_array(
            &input,
            &ArrayRequest {
                limits,
                physical,
                ..Default::default()
            },
        );
    }
}

/// VOLP: magic, u32 LE header length, header JSON, body.
fn run_volp(ops: &[u8]) {
    let len = u32::from_le_bytes([VOLP[4], VOLP[5], VOLP[6], VOLP[7]]) as usize;
    let header = mutate(&VOLP[8..8 + len], ops);
    let mut b = VOLP[..4].to_vec();
    b.extend_from_slice(&(header.len() as u32).to_le_bytes());
    b.extend_from_slice(&header);
    b.extend_from_slice(&VOLP[8 + len..]);
    run_format(&rasterpack_volp::VolpFormat, b);
}

/// FOLD: the index (big-endian offset at 12, length at 20) is the end of the file.
fn run_fold(ops: &[u8]) {
    let be = |at: usize| u64::from_be_bytes(FOLD[at..at + 8].try_into().unwrap_or([0; 8])) as usize;
    let (off, len) = (be(12), be(20));
    if off + len != FOLD.len() {
        return;
    }
    let index = mutate(&FOLD[off..], ops);
    let mut b = FOLD[..off].to_vec();
    b[20..28].copy_from_slice(&(index.len() as u64).to_be_bytes());
    b.extend_from_slice(&index);
    run_format(&rasterpack_fold::FoldFormat, b);
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, ops)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => run_vds("VolumeDataLayout", ops),
        1 => run_vds("LayerStatus", ops),
        2 => run_volp(ops),
        _ => run_fold(ops),
    }
});
