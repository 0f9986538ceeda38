//! A progress bar for one long job (a large `validate` or `convert`) on stderr, drawn by
//! `indicatif` only when stderr is a terminal, only once the job has run for about a second, at
//! most ten times a second, and cleared when the job ends.
//!
//! Formats and sinks call [`Meter::update`] often (per tile, brick, frame or write), from
//! several threads when they decode in parallel, so its common path is one relaxed atomic load
//! and a comparison: the bar (which reads the clock and takes a lock) hears only of every
//! thousandth of the work, and of its end.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rasterpack_common::Progress;

/// How long a job runs before its bar appears (`RASTERPACK_PROGRESS_DELAY_MS` overrides it).
const DEFAULT_DELAY: Duration = Duration::from_secs(1);
/// Redraws a second, at most.
const REDRAW_HZ: u8 = 10;
/// `label [#########...............]  37% 12s`: a bar of 24 cells, at most 80 columns with a
/// label of [`LABEL_CHARS`].
const TEMPLATE: &str = "{prefix} [{bar:24}] {percent:>3}% {elapsed}";
/// Longest label shown; longer ones keep their end (the file name).
const LABEL_CHARS: usize = 40;

/// The progress of one job, drawn on a terminal.
pub struct Meter {
    label: String,
    start: Instant,
    delay: Duration,
    /// Below this `done`, an update does not reach the bar.
    next_check: AtomicU64,
    /// The total the bar was last given.
    total: AtomicU64,
    /// Where the bar draws, until it is made.
    target: Mutex<Option<ProgressDrawTarget>>,
    /// Made when the job has run for `delay`.
    bar: OnceLock<ProgressBar>,
    /// When the bar was last drawn, in nanoseconds since `start` (0: never).
    last_draw: AtomicU64,
    /// The end (100%) was drawn: later reports are not shown.
    ended: AtomicBool,
    /// The bar was cleared.
    cleared: AtomicBool,
}

impl Meter {
    /// A meter drawing on stderr, or `None` when stderr is not a terminal (piped output gets
    /// no bar and pays nothing).
    pub fn on_stderr(label: &str) -> Option<Arc<Meter>> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        Some(Arc::new(Meter::new(
            label,
            ProgressDrawTarget::stderr_with_hz(REDRAW_HZ),
            delay(),
        )))
    }

    /// A meter drawing on `target` once `delay` has passed.
    pub fn new(label: &str, target: ProgressDrawTarget, delay: Duration) -> Meter {
        Meter {
            label: shorten(label),
            start: Instant::now(),
            delay,
            next_check: AtomicU64::new(0),
            total: AtomicU64::new(0),
            target: Mutex::new(Some(target)),
            bar: OnceLock::new(),
            last_draw: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            cleared: AtomicBool::new(false),
        }
    }

    /// The callback formats and sinks report to.
    pub fn progress(self: &Arc<Meter>) -> Progress {
        let meter = Arc::clone(self);
        Progress::new(move |done, total| meter.update(done, total))
    }

    /// `done` of `total` units are through.
    pub fn update(&self, done: u64, total: u64) {
        // An empty job is a done one.
        let finished = done >= total;
        if done < self.next_check.load(Relaxed) && !finished {
            return;
        }
        self.next_check
            .store(done.saturating_add((total / 1000).max(1)), Relaxed);
        let now = self.start.elapsed();
        if self.ended.load(Relaxed) || now < self.delay {
            return;
        }
        let total = total.max(1);
        if finished {
            // The end is drawn whatever the rate (`finish` forces a draw and sets the position
            // to the length), so a finished job does not stop short of 100%; one thread draws
            // it, and later reports are not shown.
            if !self.ended.swap(true, Relaxed) {
                let bar = self.bar();
                if self.total.swap(total, Relaxed) != total {
                    bar.set_length(total);
                }
                bar.finish();
            }
            return;
        }
        // At most REDRAW_HZ redraws a second, paced here rather than by indicatif's limiter
        // (which allows bursts); one thread draws, the others go back to work.
        let now_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX).max(1);
        let last = self.last_draw.load(Relaxed);
        let every = 1_000_000_000 / u64::from(REDRAW_HZ);
        if last != 0 && now_ns.saturating_sub(last) < every {
            return;
        }
        if self.last_draw.compare_exchange(last, now_ns, Relaxed, Relaxed).is_err() {
            return;
        }
        self.total.store(total, Relaxed);
        self.bar().update(|state| {
            state.set_len(total);
            state.set_pos(done);
        });
    }

    /// The bar, made with the draw target on first use.
    fn bar(&self) -> &ProgressBar {
        self.bar.get_or_init(|| {
            let target = self
                .target
                .lock()
                .ok()
                .and_then(|mut t| t.take())
                .unwrap_or_else(ProgressDrawTarget::hidden);
            let style = ProgressStyle::with_template(TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("#.");
            ProgressBar::with_draw_target(Some(1), target)
                .with_style(style)
                .with_prefix(self.label.clone())
                .with_elapsed(self.start.elapsed())
        })
    }

    /// The job ended: remove the bar, if one was drawn (once, however often this is called).
    pub fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            if !self.cleared.swap(true, Relaxed) {
                bar.finish_and_clear();
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
    use indicatif::TermLike;

    /// An 80-column terminal the test can read back: what `console` writes to a real one.
    #[derive(Clone, Debug, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl Screen {
        fn put(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn text(&self) -> String {
            self.0.lock().unwrap().clone()
        }
        fn target(&self) -> ProgressDrawTarget {
            ProgressDrawTarget::term_like_with_hz(Box::new(self.clone()), REDRAW_HZ)
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
            if n > 0 {
                self.put(&format!("\x1b[{n}A"))?;
            }
            Ok(())
        }
        fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
            if n > 0 {
                self.put(&format!("\x1b[{n}B"))?;
            }
            Ok(())
        }
        fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
            self.put(&format!("\x1b[{n}C"))
        }
        fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
            self.put(&format!("\x1b[{n}D"))
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.put(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.put(s)
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.put("\r\x1b[2K")
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The bars drawn, trailing padding removed.
    fn bars(text: &str) -> Vec<String> {
        text.split("\r\x1b[2K")
            .map(|l| l.trim_end().to_string())
            .filter(|l| l.contains('%'))
            .collect()
    }

    #[test]
    fn short_jobs_draw_nothing() {
        let screen = Screen::default();
        let meter = Meter::new("a.volp", screen.target(), Duration::from_secs(3600));
        for done in (0..=1000).step_by(10) {
            meter.update(done, 1000);
        }
        meter.finish();
        assert_eq!(screen.text(), "");
    }

    #[test]
    fn long_jobs_draw_rarely_and_clear_at_the_end() {
        let screen = Screen::default();
        let meter = Meter::new("big.npy", screen.target(), Duration::ZERO);
        // A million updates within far less than 100 ms: the first draw, then only the end.
        for done in 0..1_000_000u64 {
            meter.update(done, 1_000_000);
        }
        meter.update(1_000_000, 1_000_000);
        // Reports after the end are not shown.
        meter.update(1_000_000, 1_000_000);
        meter.update(5, 0);
        let drawn = bars(&screen.text());
        assert!((2..=4).contains(&drawn.len()), "{drawn:?}");
        assert!(
            drawn[0].starts_with("big.npy [........................]   0% "),
            "{drawn:?}"
        );
        let last = drawn.last().unwrap();
        assert!(
            last.starts_with("big.npy [########################] 100% "),
            "{drawn:?}"
        );
        assert!(drawn.iter().all(|l| l.chars().count() <= 80), "{drawn:?}");
        let before = screen.text();
        meter.finish();
        let after = screen.text();
        assert!(
            after.len() > before.len() && after.ends_with("\r\x1b[2K"),
            "cleared: {after:?}"
        );
        // finish twice (and the drop) clears once.
        meter.finish();
        drop(meter);
        assert_eq!(screen.text(), after);
    }

    #[test]
    fn redraws_follow_the_clock_from_many_threads() {
        let screen = Screen::default();
        let meter = Arc::new(Meter::new("x", screen.target(), Duration::ZERO));
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
        let draws = bars(&screen.text()).len();
        // About 0.3 s of work at 10 redraws a second (generous bounds on a loaded machine).
        assert!((1..=10).contains(&draws), "{draws} draws");
    }

    #[test]
    fn lines_fit_80_columns() {
        let long = format!("[12/345] {}/file.gvrs", "very/long/folder".repeat(10));
        let screen = Screen::default();
        let meter = Meter::new(&long, screen.target(), Duration::ZERO);
        meter.update(5, 10);
        let drawn = bars(&screen.text());
        let line = &drawn[0];
        assert!(line.chars().count() <= 80, "{line}");
        assert!(line.starts_with('…') && line.contains("file.gvrs ["), "{line}");
        assert!(line.contains("[############............]  50% "), "{line}");

        let screen = Screen::default();
        Meter::new("x", screen.target(), Duration::ZERO).update(0, 0);
        assert!(
            bars(&screen.text()).last().unwrap().contains("100%"),
            "an empty job is done"
        );
        let screen = Screen::default();
        Meter::new("x", screen.target(), Duration::ZERO).update(9, 3);
        assert!(
            bars(&screen.text()).last().unwrap().contains("100%"),
            "overshoot is capped"
        );
    }
}
