//! Memory follows a working set, not the size a file declares (issue 12): a counting allocator
//! measures the peak heap while large tables are validated and streamed from files (a JSON
//! document of 48 MiB, a SimpleU32 stream decoding to 512 MiB, an INDEX table of 64 MiB, a
//! 256 MiB table converted to `.npy`). One test, so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rasterpack_common::npy::NpyWriter;
use rasterpack_common::{
    ArrayInfo, ArrayRequest, ArraySink, DType, Format, Input, Limits, Output, Region, ValidateOptions,
};
use rasterpack_udf::{codes, parse, Hint, Prim, TableSpec, UdfArrayWriter, UdfFile, UdfFormat, UdfWriter};

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak heap (above what was allocated before) while `f` runs.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

const MIB: usize = 1 << 20;

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rasterpack-udf-memory-{}-{name}", std::process::id()))
}

fn write(path: &Path, w: &UdfWriter) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    w.write_to(&mut out).unwrap();
}

fn validate(path: &Path) -> rasterpack_common::Report {
    UdfFormat.validate(&Input::open(path).unwrap(), &ValidateOptions::default())
}

/// A sink that keeps nothing: counts bytes and checks they come in order.
struct Discard {
    bytes: u64,
    sum: u64,
}

impl ArraySink for Discard {
    fn begin(&mut self, _: &ArrayInfo) -> rasterpack_common::Result<()> {
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> rasterpack_common::Result<()> {
        assert_eq!(offset, self.bytes);
        self.bytes += data.len() as u64;
        self.sum = data.iter().fold(self.sum, |s, &b| s.wrapping_add(b as u64));
        Ok(())
    }
    fn finish(&mut self) -> rasterpack_common::Result<()> {
        Ok(())
    }
}

#[test]
fn large_tables_stream_through_a_small_working_set() {
    // A JSON array of 48 MiB: parsed as a Value it would take gigabytes.
    let json_path = scratch("json.udf");
    {
        let n = 24 * MIB - 1;
        let doc = format!("[{}0]", "0,".repeat(n));
        let mut w = UdfWriter::new("MEM").unwrap();
        let root = w.add_dataset("ROOT").unwrap();
        w.set_root(root);
        let spec = TableSpec::raw("doc", Prim::Custom, Hint::Json, &[n as u32 + 1], &[], doc.into_bytes());
        w.add(root, spec).unwrap();
        write(&json_path, &w);
    }
    let (report, peak) = peak_during(|| validate(&json_path));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert!(
        peak < 8 * MIB,
        "validate of a 48 MiB JSON table peaked at {} MiB",
        peak / MIB
    );
    // A shape the document does not have is still found.
    let mut bytes = std::fs::read(&json_path).unwrap();
    let d = UdfFile::open(&json_path).unwrap().find("doc").unwrap().1.desc_offset as usize;
    bytes[d + 0x14..d + 0x18].copy_from_slice(&7u32.to_le_bytes());
    std::fs::write(&json_path, &bytes).unwrap();
    drop(bytes);
    let (report, peak) = peak_during(|| validate(&json_path));
    assert!(report.findings.has_code(codes::JSON_SHAPE), "{:?}", report.findings);
    assert!(peak < 8 * MIB, "{} MiB", peak / MIB);
    std::fs::remove_file(&json_path).unwrap();

    // A SimpleU32 stream of 8 MiB repeat opcodes decodes to 128 Mi words (512 MiB).
    let bomb = scratch("bomb.udf");
    {
        let stream = vec![0xEFu8; 8 * MIB];
        let mut w = UdfWriter::new("MEM").unwrap();
        let root = w.add_dataset("ROOT").unwrap();
        w.set_root(root);
        w.add(root, TableSpec::array("cz", &[stream.len() as u32], &stream))
            .unwrap();
        let mut b = w.to_bytes().unwrap();
        drop(stream);
        let d = UdfFile::from_bytes(b.clone())
            .unwrap()
            .find("cz")
            .unwrap()
            .1
            .desc_offset as usize;
        b[d + 4..d + 6].copy_from_slice(&parse::encode_type_info(Prim::U32, 2, Hint::None).to_le_bytes());
        b[d + 6..d + 8].copy_from_slice(&17u16.to_le_bytes());
        b[d + 0x14..d + 0x18].copy_from_slice(&131_072u32.to_le_bytes());
        b[d + 0x18..d + 0x1C].copy_from_slice(&1024u32.to_le_bytes());
        std::fs::write(&bomb, &b).unwrap();
    }
    let (report, peak) = peak_during(|| validate(&bomb));
    assert!(!report.findings.has_errors(), "{:?}", report.findings);
    assert!(
        peak < 16 * MIB,
        "validate of 512 MiB of decoded words peaked at {} MiB",
        peak / MIB
    );
    let file = UdfFile::open(&bomb).unwrap();
    let ((), peak) = peak_during(|| {
        let mut sink = Discard { bytes: 0, sum: 0 };
        file.stream(&ArrayRequest::default(), &mut sink).unwrap();
        assert_eq!(sink.bytes, 512 * MIB as u64);
    });
    assert!(
        peak < 16 * MIB,
        "streaming 512 MiB of decoded words peaked at {} MiB",
        peak / MIB
    );
    let (part, peak) = peak_during(|| {
        file.read(&ArrayRequest::default().with_region(Region::from_start_size(&[0, 0], &[1, 4]).unwrap()))
            .unwrap()
    });
    assert_eq!(part.to_vec::<u32>().unwrap(), [0, 0, 0, 0]);
    assert!(peak < 2 * MIB, "a 4-value region peaked at {} KiB", peak >> 10);
    // In memory, the whole table is refused by the array limit before any decoding.
    let small = Limits {
        max_array_bytes: 64 * MIB as u64,
        ..Limits::default()
    };
    let (e, peak) = peak_during(|| {
        UdfFormat
            .read_array(
                &Input::open(&bomb).unwrap(),
                &ArrayRequest::default().with_limits(small),
            )
            .unwrap_err()
    });
    assert_eq!(e.code, "limit.array");
    assert!(peak < MIB, "{} KiB", peak >> 10);
    std::fs::remove_file(&bomb).unwrap();

    // An INDEX table of 64 MiB (u32) into a 1000-row table.
    let index = scratch("index.udf");
    {
        let n = 16 * MIB as u32;
        let idx: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) % 1000).collect();
        let mut w = UdfWriter::new("MEM").unwrap();
        let root = w.add_dataset("ROOT").unwrap();
        w.set_root(root);
        w.add(root, TableSpec::array("pts", &[1000], &[0f32; 1000])).unwrap();
        w.add(
            root,
            TableSpec::array("idx", &[n], &idx)
                .with_hint(Hint::Index, &[])
                .index_into("pts"),
        )
        .unwrap();
        write(&index, &w);
    }
    let (report, peak) = peak_during(|| validate(&index));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert!(
        peak < 16 * MIB,
        "validate of a 64 MiB INDEX table peaked at {} MiB",
        peak / MIB
    );
    std::fs::remove_file(&index).unwrap();

    // A 256 MiB table written by the streaming writer (zeros left as holes), validated and
    // converted to .npy.
    let big = scratch("big.udf");
    let values = 64 * MIB as u64;
    let ((), peak) = peak_during(|| {
        let f = std::fs::File::create(&big).unwrap();
        let mut w = UdfArrayWriter::new(Output::File(&f));
        w.begin(&ArrayInfo::new(DType::F32, vec![values / 1024, 1024])).unwrap();
        w.write_at(0, &1.5f32.to_le_bytes()).unwrap();
        w.fill_at(4, values * 4 - 4, &[0; 4]).unwrap();
        w.finish().unwrap();
    });
    assert!(peak < MIB, "writing a 256 MiB table peaked at {} KiB", peak >> 10);
    let (report, peak) = peak_during(|| validate(&big));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert!(
        peak < 16 * MIB,
        "validate of a 256 MiB table peaked at {} MiB",
        peak / MIB
    );
    let npy = scratch("big.npy");
    let ((), peak) = peak_during(|| {
        let out = std::fs::File::create(&npy).unwrap();
        let mut sink = NpyWriter::new(Output::File(&out));
        UdfFormat
            .stream_array(&Input::open(&big).unwrap(), &ArrayRequest::default(), &mut sink)
            .unwrap();
        sink.finish().unwrap();
    });
    assert!(
        peak < 16 * MIB,
        "converting a 256 MiB table to .npy peaked at {} MiB",
        peak / MIB
    );
    assert_eq!(std::fs::metadata(&npy).unwrap().len(), 128 + values * 4);
    std::fs::remove_file(&npy).unwrap();
    std::fs::remove_file(&big).unwrap();
}
