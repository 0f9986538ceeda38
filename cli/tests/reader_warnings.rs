//! Warnings a reader attaches to an array (a VDS channel declared but never written) are said on
//! stderr by `convert` and never written into the output's metadata.

use std::path::PathBuf;
use std::process::Command;

use rasterpack_vds_meta::testsupport::{sample_data, write_dir, Spec};
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rasterpack-reader-warnings-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn unwritten_vds_channel_warns_on_stderr_only() {
    let dir = scratch("vds");
    let ds = dir.join("ds");
    let spec = Spec::default();
    write_dir(&spec, &sample_data(&spec, 3), &ds).unwrap();
    let mut layout: Value = serde_json::from_slice(&std::fs::read(ds.join("VolumeDataLayout")).unwrap()).unwrap();
    let mut extra = layout["channelDescriptors"][0].clone();
    extra["name"] = "Quality".into();
    layout["channelDescriptors"].as_array_mut().unwrap().push(extra);
    std::fs::write(ds.join("VolumeDataLayout"), serde_json::to_vec(&layout).unwrap()).unwrap();

    // UDF keeps the source's attributes as a JSON table: the warning must not end up there.
    let out = dir.join("q.udf");
    let o = Command::new(env!("CARGO_BIN_EXE_rasterpack"))
        .args([
            "convert",
            ds.to_str().unwrap(),
            out.to_str().unwrap(),
            "--element",
            "Quality",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning:") && stderr.contains("vds.channel.unwritten"),
        "{stderr}"
    );
    let written = std::fs::read(&out).unwrap();
    let needle = b"vds.channel.unwritten";
    assert!(
        !written.windows(needle.len()).any(|w| w == needle),
        "the reader's warning leaked into the output file"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
