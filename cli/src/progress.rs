//! A progress bar for one long job (a large `validate` or `convert`) on stderr, drawn only when
//! stderr is a terminal, only once the job has run for about a second, at most ten times a
//! second, and cleared when the job ends.
//!
//! Formats and sinks call [`Meter::update`] often (per tile, brick, frame or write), from
//! several threads when they decode in parallel, so its common path is two relaxed atomic
//! stores, one load and a comparison: the clock is read only after another slice of the work
//! (about a thousandth of it) is through.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rasterpack_common::Progress;

/// How long a job runs before its bar appears (`RASTERPACK_PROGRESS_DELAY_MS` overrides it).
const DEFAULT_DELAY: Duration = Duration::from_secs(1);
/// Least time between two redraws.
const REDRAW_EVERY: Duration = Duration::from_millis(100);
/// Cells of the bar itself.
const BAR_CELLS: usize = 24;
/// Longest label shown; longer ones keep their end (the file name).
const LABEL_CHARS: usize = 40;

/// The progress of one job, drawn on a terminal.
pub struct Meter {
    label: String,
    out: Mutex<Box<dyn Write + Send>>,
    start: Instant,
    delay: Duration,
    done: AtomicU64,
    total: AtomicU64,
    /// Below this `done`, an update does not look at the clock.
    next_check: AtomicU64,
    /// When the bar was last drawn, in nanoseconds since `start` (0: never).
    last_draw: AtomicU64,
    /// A bar is on the screen (and must be cleared at the end).
    shown: AtomicBool,
    /// The finished state (100%) was drawn: later updates keep to the redraw rate.
    final_drawn: AtomicBool,
}

impl Meter {
    /// A meter drawing on stderr, or `None` when stderr is not a terminal (piped output gets
    /// no bar and pays nothing).
    pub fn on_stderr(label: &str) -> Option<Arc<Meter>> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        Some(Arc::new(Meter::new(label, Box::new(std::io::stderr()), delay())))
    }

    /// A meter drawing on `out` once `delay` has passed.
    pub fn new(label: &str, out: Box<dyn Write + Send>, delay: Duration) -> Meter {
        Meter {
            label: shorten(label),
            out: Mutex::new(out),
            start: Instant::now(),
            delay,
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            next_check: AtomicU64::new(0),
            last_draw: AtomicU64::new(0),
            shown: AtomicBool::new(false),
            final_drawn: AtomicBool::new(false),
        }
    }

    /// The callback formats and sinks report to.
    pub fn progress(self: &Arc<Meter>) -> Progress {
        let meter = Arc::clone(self);
        Progress::new(move |done, total| meter.update(done, total))
    }

    /// `done` of `total` units are through.
    pub fn update(&self, done: u64, total: u64) {
        self.done.store(done, Relaxed);
        self.total.store(total, Relaxed);
        let finished = total > 0 && done >= total;
        if done < self.next_check.load(Relaxed) && !finished {
            return;
        }
        self.next_check
            .store(done.saturating_add((total / 1000).max(1)), Relaxed);
        let now = self.start.elapsed();
        if now < self.delay {
            return;
        }
        let now_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX).max(1);
        let last = self.last_draw.load(Relaxed);
        let too_soon = last != 0 && now_ns.saturating_sub(last) < REDRAW_EVERY.as_nanos() as u64;
        // The end is drawn once whatever the rate, so a finished job does not stop short of 100%.
        let first_end = finished && !self.final_drawn.load(Relaxed);
        if too_soon && !first_end {
            return;
        }
        // One thread draws; the others go back to work.
        if self.last_draw.compare_exchange(last, now_ns, Relaxed, Relaxed).is_err() {
            return;
        }
        if finished {
            self.final_drawn.store(true, Relaxed);
        }
        self.draw(now);
    }

    fn draw(&self, elapsed: Duration) {
        let (done, total) = (self.done.load(Relaxed), self.total.load(Relaxed));
        let line = render(&self.label, done, total, elapsed);
        let Ok(mut out) = self.out.lock() else { return };
        // A terminal that stops accepting output is no reason to fail the job.
        let _ = write!(out, "\r\x1b[2K{line}");
        let _ = out.flush();
        self.shown.store(true, Relaxed);
    }

    /// The job ended: remove the bar, if one was drawn.
    pub fn finish(&self) {
        if self.shown.swap(false, Relaxed) {
            if let Ok(mut out) = self.out.lock() {
                let _ = write!(out, "\r\x1b[2K");
                let _ = out.flush();
            }
        }
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The delay before a bar appears: 1 s, or `RASTERPACK_PROGRESS_DELAY_MS`.
fn delay() -> Duration {
    std::env::var("RASTERPACK_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_DELAY)
}

/// `label [#########...............]  37%  12s` (at most 80 columns).
fn render(label: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let fraction = if total == 0 {
        1.0
    } else {
        (done.min(total) as f64) / (total as f64)
    };
    let filled = ((fraction * BAR_CELLS as f64) as usize).min(BAR_CELLS);
    format!(
        "{label} [{}{}] {:>3}% {}s",
        "#".repeat(filled),
        ".".repeat(BAR_CELLS - filled),
        (fraction * 100.0) as u32,
        elapsed.as_secs()
    )
}

/// At most [`LABEL_CHARS`] characters, keeping the end (`…` + the file name).
fn shorten(label: &str) -> String {
    let n = label.chars().count();
    if n <= LABEL_CHARS {
        return label.to_string();
    }
    let tail: String = label.chars().skip(n - (LABEL_CHARS - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn short_jobs_draw_nothing() {
        let out = Shared::default();
        let meter = Meter::new("a.volp", Box::new(out.clone()), Duration::from_secs(3600));
        for done in (0..=1000).step_by(10) {
            meter.update(done, 1000);
        }
        meter.finish();
        assert_eq!(out.text(), "");
    }

    #[test]
    fn long_jobs_draw_rarely_and_clear_at_the_end() {
        let out = Shared::default();
        let meter = Meter::new("big.npy", Box::new(out.clone()), Duration::ZERO);
        // A million updates within far less than 100 ms: the first draw, then only the end.
        for done in 0..1_000_000u64 {
            meter.update(done, 1_000_000);
        }
        meter.update(1_000_000, 1_000_000);
        // Reports after the end (or of an unknown total) keep to the rate.
        meter.update(1_000_000, 1_000_000);
        meter.update(5, 0);
        let drawn = out.text();
        let draws = drawn.matches("\r\x1b[2K").count();
        assert!((2..=4).contains(&draws), "{draws} draws: {drawn:?}");
        assert!(
            drawn.starts_with("\r\x1b[2Kbig.npy [........................]   0% 0s"),
            "{drawn:?}"
        );
        assert!(
            drawn.ends_with("\r\x1b[2Kbig.npy [########################] 100% 0s"),
            "{drawn:?}"
        );
        meter.finish();
        assert!(out.text().ends_with("100% 0s\r\x1b[2K"), "cleared: {:?}", out.text());
        // finish twice (and the drop) clears once.
        meter.finish();
        drop(meter);
        assert_eq!(out.text().matches("\r\x1b[2K").count(), draws + 1);
    }

    #[test]
    fn redraws_follow_the_clock_from_many_threads() {
        let out = Shared::default();
        let meter = Arc::new(Meter::new("x", Box::new(out.clone()), Duration::ZERO));
        let progress = meter.progress();
        let total = 4 * 300u64;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let p = progress.clone();
                s.spawn(move || {
                    for i in 0..300u64 {
                        p.report(t * 300 + i, total);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                });
            }
        });
        let draws = out.text().matches("\r\x1b[2K").count();
        // About 0.3 s of work at 10 redraws a second (generous bounds on a loaded machine).
        assert!((1..=10).contains(&draws), "{draws} draws");
    }

    #[test]
    fn lines_fit_80_columns() {
        let long = format!("[12/345] {}/file.gvrs", "very/long/folder".repeat(10));
        let line = render(&shorten(&long), 5, 10, Duration::from_secs(12345));
        assert!(line.chars().count() <= 80, "{line}");
        assert!(line.starts_with('…') && line.contains("file.gvrs ["), "{line}");
        assert!(line.contains("[############............]  50% 12345s"), "{line}");
        assert!(
            render("x", 0, 0, Duration::ZERO).contains("100%"),
            "an empty job is done"
        );
        assert!(
            render("x", 9, 3, Duration::ZERO).contains("100%"),
            "overshoot is capped"
        );
    }
}
