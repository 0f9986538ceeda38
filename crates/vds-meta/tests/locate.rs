//! "Cannot locate" is never "never written" (issue 17, item 4): a layer the dataset says is
//! stored but whose chunks cannot be found fails reads of its channel (exit 1 naming it) instead
//! of reading as unwritten bricks. Each place a layer is located is damaged in turn: the
//! container's index pages and chunk extents (every page and chunk of generated containers),
//! its layer metadata, `LayerStatus` (missing, a wrong chunk count, a damaged layer name) and
//! the object-store layout (metadata pages or the layer's folder gone). The never-written
//! channel rule still holds where the dataset itself says so.

use std::path::{Path, PathBuf};

use rasterpack_common::{ArrayRequest, Error, ErrorKind, Format, Input, Limits, Region, ValidateOptions};
use rasterpack_vds_meta::container::Container;
use rasterpack_vds_meta::layout::VdsCompression;
use rasterpack_vds_meta::testsupport::{sample_data, write_container, write_dir, Spec};
use rasterpack_vds_meta::VdsFormat;
use serde_json::Value;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rasterpack-vds-locate-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn read(input: &Input, physical: bool, region: Option<Region>) -> rasterpack_common::Result<Vec<u8>> {
    VdsFormat
        .read_array(
            input,
            &ArrayRequest {
                physical,
                region: region.map(Into::into),
                ..Default::default()
            },
        )
        .map(|a| a.data)
}

/// Whole reads (stored and physical) and a one-voxel read of the first brick fail as invalid
/// with `code`, naming `layer`; validation rejects the dataset.
fn assert_unlocatable(input: &Input, code: &str, layer: &str, case: &str) {
    let one = Region::from_start_size(&[0, 0, 0], &[1, 1, 1]).unwrap();
    for (physical, region) in [(false, None), (true, None), (false, Some(one))] {
        let e: Error = read(input, physical, region).expect_err(case);
        assert_eq!(e.kind, ErrorKind::Invalid, "{case}: {e}");
        match code.strip_suffix('*') {
            Some(prefix) => assert!(e.code.starts_with(prefix), "{case}: {e}"),
            None => assert_eq!(e.code, code, "{case}: {e}"),
        }
        assert!(e.message.contains(layer), "{case}: the error names {layer}: {e}");
    }
    let r = VdsFormat.validate(input, &ValidateOptions::default());
    assert!(!r.is_valid(false), "{case}: {:?}", r.findings);
    assert!(
        !r.findings.has_code("vds.channel.unwritten") && !r.findings.has_code("vds.layer.no_primary"),
        "{case}: never called unwritten: {:?}",
        r.findings
    );
}

fn specs() -> Vec<Spec> {
    let mut v = Vec::new();
    for compression in [VdsCompression::None, VdsCompression::RLE, VdsCompression::Zip] {
        for page_entries in [1, 4] {
            v.push(Spec {
                dims: vec![70, 40, 5],
                compression,
                page_entries,
                unwritten: vec![1],
                ..Default::default()
            });
        }
    }
    v
}

/// Every index page offset of every generated container, pointed past the end of the file
/// (`edges/vds/vds_index_page_offset_past_eof.vds` in general).
#[test]
fn index_pages_past_eof_fail_reads() {
    let mut cases = 0;
    for spec in specs() {
        let good = write_container(&spec, &sample_data(&spec, 5));
        assert!(read(&Input::from_bytes("g.vds", good.clone()), false, None).is_ok());
        let c = Container::open(&Input::from_bytes("g.vds", good.clone()), &Limits::default()).unwrap();
        let f = c.file("Dimensions_012LOD0").unwrap();
        let pd = f.page_dir.as_ref().unwrap();
        for (p, &po) in pd.index_page_offsets.iter().enumerate() {
            if po == 0 {
                continue;
            }
            for past in [good.len() as i64, good.len() as i64 + 4096, i64::MAX] {
                let mut b = good.clone();
                let at = pd.index_offsets_at as usize + 8 * p;
                b[at..at + 8].copy_from_slice(&past.to_le_bytes());
                let case = format!("{:?}/{} page {p} at {past}", spec.compression, spec.page_entries);
                assert_unlocatable(
                    &Input::from_bytes("p.vds", b),
                    "vds.container.index_page",
                    "Dimensions_012LOD0",
                    &case,
                );
                cases += 1;
            }
        }
    }
    assert!(cases > 30, "{cases} cases");
}

/// Every written chunk's extent moved past the end of the file, or made longer than the rest
/// of the file (`edges/vds/vds_chunk_extent_past_eof.vds` in general).
#[test]
fn chunk_extents_past_eof_fail_reads() {
    let mut cases = 0;
    for spec in specs() {
        let good = write_container(&spec, &sample_data(&spec, 6));
        let c = Container::open(&Input::from_bytes("g.vds", good.clone()), &Limits::default()).unwrap();
        let f = c.file("Dimensions_012LOD0").unwrap();
        for (i, e) in f.written_entries() {
            if f.hash(i) == 0 || e.length <= 0 {
                continue;
            }
            let at = e.entry_offset as usize;
            let mut moved = good.clone();
            moved[at..at + 8].copy_from_slice(&(good.len() as i64 + 1).to_le_bytes());
            let mut longer = good.clone();
            let len = (good.len() as u64 - e.offset as u64 + 1) as i32;
            longer[at + 8..at + 12].copy_from_slice(&len.to_le_bytes());
            for (what, b) in [("moved", moved), ("longer", longer)] {
                let case = format!("{:?}/{} chunk {i} {what}", spec.compression, spec.page_entries);
                assert_unlocatable(
                    &Input::from_bytes("c.vds", b),
                    "vds.container.chunk_extent",
                    "Dimensions_012LOD0",
                    &case,
                );
                cases += 1;
            }
        }
    }
    assert!(cases > 30, "{cases} cases");
}

/// The layer file's metadata (compression, valid chunk count) cannot be read: its declared
/// length is changed, so the layer cannot be presented at all (the first finding says why:
/// with the length the page directory's layout moves too).
#[test]
fn unreadable_layer_metadata_fails_reads() {
    let spec = Spec {
        compression: VdsCompression::RLE,
        ..Default::default()
    };
    let good = write_container(&spec, &sample_data(&spec, 7));
    let c = Container::open(&Input::from_bytes("g.vds", good.clone()), &Limits::default()).unwrap();
    let f = c.file("Dimensions_012LOD0").unwrap();
    let at = f.entry.entry_offset as usize + 28; // file metadata length
    let mut b = good.clone();
    b[at..at + 4].copy_from_slice(&13i32.to_le_bytes());
    assert_unlocatable(
        &Input::from_bytes("m.vds", b),
        "vds.container.*",
        "Dimensions_012LOD0",
        "layer metadata",
    );
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = tmp(name);
    let spec = Spec {
        compression: VdsCompression::RLE,
        page_entries: 4,
        ..Default::default()
    };
    write_dir(&spec, &sample_data(&spec, 8), &dir).unwrap();
    dir
}

fn dir_input(dir: &Path) -> Input {
    Input::Dir {
        path: dir.to_path_buf(),
    }
}

fn edit_status(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let p = dir.join("LayerStatus");
    let mut st: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut st);
    std::fs::write(p, serde_json::to_vec(&st).unwrap()).unwrap();
}

fn cleanup(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_file(format!("{}.objmeta.json", dir.display()));
}

/// Object store: `LayerStatus` missing, a chunk count that disagrees with the geometry (the
/// metadata pages are then not loaded), a damaged layer name, metadata pages gone where no
/// page directory lists them, the layer's folder gone.
#[test]
fn object_store_layers_that_cannot_be_located_fail_reads() {
    let dir = fresh_dir("good");
    assert!(read(&dir_input(&dir), false, None).is_ok());
    cleanup(&dir);

    let dir = fresh_dir("no-status");
    std::fs::remove_file(dir.join("LayerStatus")).unwrap();
    assert_unlocatable(
        &dir_input(&dir),
        "vds.layer_status.missing",
        "LayerStatus",
        "no LayerStatus",
    );
    cleanup(&dir);

    let dir = fresh_dir("chunk-count");
    edit_status(&dir, |st| {
        let n = st[0]["chunkCount"].as_u64().unwrap();
        st[0]["chunkCount"] = (n + 1).into();
    });
    assert_unlocatable(
        &dir_input(&dir),
        "vds.layer.chunk_count",
        "Dimensions_012LOD0",
        "chunk count",
    );
    cleanup(&dir);

    let dir = fresh_dir("name");
    edit_status(&dir, |st| st[0]["layerName"] = "Dimensions_012LOE0".into());
    assert_unlocatable(&dir_input(&dir), "vds.layer.name", "Dimensions_012LOE0", "layer name");
    cleanup(&dir);

    // Without a page directory the pages are found by listing: none found while
    // validChunkCount says chunks are written.
    let dir = fresh_dir("pages");
    edit_status(&dir, |st| {
        st[0].as_object_mut().unwrap().remove("pageDirectory");
    });
    assert!(read(&dir_input(&dir), false, None).is_ok(), "listing finds the pages");
    std::fs::remove_dir_all(dir.join("Dimensions_012LOD0/ChunkMetadata")).unwrap();
    assert_unlocatable(
        &dir_input(&dir),
        "vds.layer.valid_chunk_count",
        "Dimensions_012LOD0",
        "pages gone",
    );
    cleanup(&dir);

    // The whole layer folder gone (the page directory lists its pages).
    let dir = fresh_dir("folder");
    std::fs::remove_dir_all(dir.join("Dimensions_012LOD0")).unwrap();
    for physical in [false, true] {
        let e = read(&dir_input(&dir), physical, None).unwrap_err();
        assert_eq!(e.code, "vds.layer.metadata_page_missing", "{e}");
    }
    cleanup(&dir);
}

/// Where the dataset itself says nothing was written the rule still holds: a layer whose
/// pages are all unwritten (validChunkCount 0) reads as unwritten bricks, exit 0.
#[test]
fn layers_written_empty_still_read_as_unwritten() {
    let spec = Spec {
        compression: VdsCompression::RLE,
        page_entries: 4,
        unwritten: (0..64).collect(),
        ..Default::default()
    };
    let dir = tmp("empty");
    write_dir(&spec, &sample_data(&spec, 9), &dir).unwrap();
    let a = read(&dir_input(&dir), false, None).unwrap();
    assert!(a.iter().all(|&b| b == 0), "unwritten R32 reads 0");
    let r = VdsFormat.validate(&dir_input(&dir), &ValidateOptions::default());
    assert!(r.is_valid(false), "{:?}", r.findings);
    cleanup(&dir);
}

/// The corpus files of item 4: `validate` exit 1 as before, and reads now fail too.
#[test]
fn corpus_past_eof_files_fail_reads() {
    let Some(edges) = rasterpack_common::testkit::corpus_dir("edges/vds") else {
        return;
    };
    for (file, code, layer) in [
        (
            "vds_index_page_offset_past_eof.vds",
            "vds.container.index_page",
            "Dimensions_01LOD0",
        ),
        (
            "vds_chunk_extent_past_eof.vds",
            "vds.container.chunk_extent",
            "Dimensions_012LOD0",
        ),
    ] {
        let input = Input::open(edges.join(file)).unwrap();
        for physical in [false, true] {
            let e = read(&input, physical, None).unwrap_err();
            assert_eq!(e.code, code, "{file}: {e}");
            assert!(e.message.contains(layer), "{file}: {e}");
        }
        assert!(!VdsFormat.validate(&input, &ValidateOptions::default()).is_valid(false));
    }
}
