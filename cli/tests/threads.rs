//! Reads from two threads at once run at the same time, for every format (issue 18).
//!
//! Set up as the Python package runs reads with `RAYON_NUM_THREADS=1`: rayon's global pool has
//! one worker, and each reading thread runs its read through
//! `rasterpack::on_this_thread_when_alone`. That one global worker is then kept busy for the
//! whole test, so a read that hands any of its work to the global pool stalls (the bug: GVRS's
//! pipelined decoder queued its tiles there, and two reads from two Python threads took turns).
//! Each read's sink waits at its first delivered piece until the other read has delivered one
//! too: both reads are in flight at once, or the test fails (a bounded wait, never a hang).
//! A timing-free check: no speed bar, only who waits for whom.
//!
//! This binary holds one test: the global pool is configured once per process.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Duration;

use rasterpack::common::ArrayInfo;
use rasterpack::{ArrayRequest, ArraySink, Error, Limits, NdArray, Result, WriteOptions};

/// How long a read may wait for the other one (generous: a loaded machine).
const WAIT: Duration = Duration::from_secs(30);

fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(rel)
}

/// Two parties meet once; a party that waits longer than [`WAIT`] gets an error, not a hang.
struct Rendezvous {
    arrived: Mutex<usize>,
    all: Condvar,
}

impl Rendezvous {
    fn new() -> Rendezvous {
        Rendezvous {
            arrived: Mutex::new(0),
            all: Condvar::new(),
        }
    }

    fn meet(&self) -> Result<()> {
        let mut n = self.arrived.lock().unwrap();
        *n += 1;
        self.all.notify_all();
        let (n, timeout) = self.all.wait_timeout_while(n, WAIT, |n| *n < 2).unwrap();
        if timeout.timed_out() && *n < 2 {
            return Err(Error::usage(
                "the other read never delivered a piece while this one was in flight",
            ));
        }
        Ok(())
    }
}

/// Receives the array into memory piece by piece (no direct buffer: the pieces are the reads'
/// progress) and meets the other read at its first piece.
struct MeetingSink {
    meet: Arc<Rendezvous>,
    met: bool,
    bytes: Vec<u8>,
}

impl MeetingSink {
    fn first_piece(&mut self) -> Result<()> {
        if !self.met {
            self.met = true;
            self.meet.meet()?;
        }
        Ok(())
    }
}

impl ArraySink for MeetingSink {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.bytes = vec![0; info.in_memory_len(&Limits::default())?];
        Ok(())
    }

    fn random_access(&self) -> bool {
        true
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.first_piece()?;
        let at = offset as usize;
        self.bytes[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.first_piece()?;
        let at = offset as usize;
        for v in self.bytes[at..at + len as usize].chunks_exact_mut(pattern.len()) {
            v.copy_from_slice(pattern);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Read `path`'s default array with `limits` on this thread, as the Python package does.
fn read(path: &PathBuf, limits: Limits, meet: Option<Arc<Rendezvous>>) -> Result<Vec<u8>> {
    let file = rasterpack::open(path)?;
    let req = ArrayRequest {
        limits,
        ..ArrayRequest::default()
    };
    let mut sink = MeetingSink {
        meet: meet.unwrap_or_else(|| {
            // Alone: a rendezvous already met by a phantom party.
            let r = Rendezvous::new();
            *r.arrived.lock().unwrap() = 1;
            Arc::new(r)
        }),
        met: false,
        bytes: Vec::new(),
    };
    rasterpack::on_this_thread_when_alone(|| file.stream(&req, &mut sink))?;
    Ok(sink.bytes)
}

#[test]
fn two_reads_from_two_threads_are_in_flight_at_once_for_every_format() {
    rayon::ThreadPoolBuilder::new().num_threads(1).build_global().unwrap();
    // A working set small enough that every read comes in several pieces (GVRS then pipelines
    // its decoding on a helper thread, the path that queued in the global pool).
    let small = Limits {
        working_set: 256 << 10,
        ..Limits::default()
    };
    let limits_for = |p: &PathBuf| match p.extension().and_then(|e| e.to_str()) {
        Some("gvrs") => small,
        _ => Limits::default(),
    };
    // Files of several tiles/bricks/chunks, written by the library: 512 x 512 float32 (1 MiB).
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let values: Vec<f32> = (0..512 * 512).map(|i| ((i % 509) as f32).sin() * 100.0).collect();
    let array = NdArray::from_vec(vec![512, 512], values.clone()).unwrap();
    // VOLP holds 3-D volumes [levels, y, x].
    let cube = NdArray::from_vec(vec![4, 256, 256], values).unwrap();
    let mut files = Vec::new();
    for (name, tile) in [
        ("grid.gvrs", Some((64, 64))),
        ("cube.volp", None),
        ("t.udf", None),
        ("c.fold", None),
        ("v.vds", None),
    ] {
        let path = dir.join(name);
        let opts = WriteOptions {
            tile,
            ..WriteOptions::default()
        };
        let values = if name.ends_with(".volp") { &cube } else { &array };
        rasterpack::save(values, &path, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        files.push(path);
    }
    for rel in ["vds/small_r32_zip.vds", "vds/small_4d_r32_none_lod1.vds"] {
        files.push(testdata(rel));
    }
    // The values read alone, while the global pool is free.
    let wants: Vec<Vec<u8>> = files
        .iter()
        .map(|p| read(p, limits_for(p), None).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();

    // Occupy the global pool's one worker until the end of the test.
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    // From a thread of no pool (this one ran reads in a pool of its own): the global pool.
    std::thread::spawn(move || {
        rayon::spawn(move || {
            started_tx.send(()).unwrap();
            let _ = release_rx.recv();
        })
    })
    .join()
    .unwrap();
    started_rx.recv().unwrap();

    let mut failures = Vec::new();
    for (path, want) in files.iter().zip(&wants) {
        let rel = path.display();
        let meet = Arc::new(Rendezvous::new());
        let start = Arc::new(Barrier::new(2));
        let (done_tx, done_rx) = mpsc::channel();
        for _ in 0..2 {
            let (path, meet, start, limits) = (path.clone(), Arc::clone(&meet), Arc::clone(&start), limits_for(path));
            let done = done_tx.clone();
            std::thread::spawn(move || {
                start.wait();
                let _ = done.send(read(&path, limits, Some(meet)));
            });
        }
        for _ in 0..2 {
            // A read stuck behind the occupied global worker never returns: bounded here.
            match done_rx.recv_timeout(2 * WAIT) {
                Ok(Ok(got)) if got == *want => {}
                Ok(Ok(_)) => failures.push(format!("{rel}: values differ from the read alone")),
                Ok(Err(e)) => failures.push(format!("{rel}: {e}")),
                Err(_) => {
                    failures.push(format!(
                        "{rel}: a read did not finish: it waits for the global rayon pool"
                    ));
                    break;
                }
            }
        }
    }
    drop(release_tx);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{failures:#?}");
}
