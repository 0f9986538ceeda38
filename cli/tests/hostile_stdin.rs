//! Standard input is read like a file (issue 17 item 9): a pipe of a known format is spooled
//! into an unnamed temporary file and read by position, so what it costs in memory follows the
//! work, not the stream's length. Before, `validate -` and `inspect -` held the whole stream
//! (604 MiB and 996 MiB of peak RSS for the two streams below).

mod support;

use std::io::Write;

use support::{check_bound, run_fed, Run};

/// Write `len` zero bytes after `head`.
fn zeros_after(head: Vec<u8>, len: u64) -> impl FnOnce(&mut dyn Write) -> std::io::Result<()> + Send + 'static {
    move |w: &mut dyn Write| {
        w.write_all(&head)?;
        let block = vec![0u8; 1 << 20];
        let mut left = len;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            w.write_all(&block[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}

#[track_caller]
fn expect(args: &[&str], r: &Run, code: i32) {
    assert_eq!(
        r.code(),
        Some(code),
        "{args:?}: stdout {}\nstderr {}",
        r.stdout(),
        r.stderr()
    );
    check_bound(args, r);
}

/// `(printf VOLP; head -c 600M /dev/zero) | rasterpack validate -`: the header length 0 is the
/// finding, within the memory bound.
#[test]
fn volp_magic_and_600_mib_of_zeros_on_stdin() {
    let args = ["validate", "-"];
    let r = run_fed(&args, zeros_after(b"VOLP".to_vec(), 600 << 20));
    expect(&args, &r, 1);
    assert!(r.stdout().contains("volp.header.len_out_of_range"), "{}", r.stdout());
}

/// `inspect -` of a 992 MiB .npy (260,046,848 float32 values) on stdin reads its header and
/// shape, within the memory bound; `validate -` reads every value, within it too.
#[test]
fn a_992_mib_npy_on_stdin() {
    let count: u64 = 260_046_848;
    let mut dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({count},), }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut head = b"\x93NUMPY\x01\x00".to_vec();
    head.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    head.extend_from_slice(dict.as_bytes());
    for command in ["inspect", "validate"] {
        let args = [command, "--json", "-"];
        let r = run_fed(&args, zeros_after(head.clone(), count * 4));
        expect(&args, &r, 0);
        let doc: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
        assert_eq!(doc["files"][0]["format"], "npy", "{}", r.stdout());
        assert_eq!(doc["files"][0]["path"], "-");
    }
}

/// A stream that goes on past the 1 GiB a stream may hold stops there, exit 2, still within the
/// bound (it was held in memory up to the cap before).
#[test]
fn a_stream_past_the_cap_is_refused_within_the_bound() {
    let args = ["validate", "-"];
    let r = run_fed(&args, zeros_after(b"VOLP".to_vec(), (1 << 30) + (1 << 20)));
    expect(&args, &r, 2);
    assert!(r.stderr().contains("goes on past 1073741824 bytes"), "{}", r.stderr());
}
