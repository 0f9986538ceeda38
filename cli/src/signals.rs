//! Signals during `convert`: SIGINT, SIGTERM and SIGHUP remove the temporary output (and abort
//! a multipart upload to a URL) before the process ends, and a file-size limit (SIGXFSZ)
//! becomes an ordinary EFBIG write error.
//!
//! The cleanup runs on a watcher thread (signal-hook's iterator: the real handler only wakes
//! the thread through a pipe), so it may take a lock and call `remove_file`, which a signal
//! handler may not. Creating, renaming and removing the temporary file all happen under one
//! lock, and the watcher keeps that lock until the process is gone: either the output was
//! renamed into place before the signal was handled, or the temporary file is removed and no
//! rename follows.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// The temporary file to remove if a terminating signal arrives.
static PENDING: Mutex<Option<PathBuf>> = Mutex::new(None);

fn pending() -> MutexGuard<'static, Option<PathBuf>> {
    // A panic while holding the lock leaves the path as it was, which is still right.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// What removes a remote output (the objects of a dataset uploaded under a prefix) if a
/// terminating signal arrives: run on the watcher thread, which keeps the lock to the end.
type RemoteCleanup = Box<dyn Fn() + Send>;
static REMOTE: Mutex<Option<RemoteCleanup>> = Mutex::new(None);

fn remote() -> MutexGuard<'static, Option<RemoteCleanup>> {
    REMOTE.lock().unwrap_or_else(|e| e.into_inner())
}

/// From now on, a signal runs `cleanup` before the process ends.
pub fn track_remote(cleanup: RemoteCleanup) {
    *remote() = Some(cleanup);
}

/// The remote output is finished (or removed already): a signal no longer touches it.
pub fn untrack_remote() {
    *remote() = None;
}

/// Multipart uploads in progress, aborted on a terminating signal (the process ends without
/// unwinding, so an upload's own drop would never abort it and its parts would stay, open and
/// billed, in the bucket).
static UPLOADS: Mutex<Vec<rasterpack_store::UploadAborter>> = Mutex::new(Vec::new());

fn uploads() -> MutexGuard<'static, Vec<rasterpack_store::UploadAborter>> {
    UPLOADS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Set by the watcher when it starts handling a terminating signal.
static TERMINATING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Called before the process ends on its own: while a signal's cleanup is under way (aborting
/// an upload makes the conversion's writes fail), wait for the watcher to end the process by
/// that signal rather than exit with the failed write's code.
pub fn hold_if_terminating() {
    if TERMINATING.load(std::sync::atomic::Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
}

/// Abort `upload` if a terminating signal is handled before it ends. Ended uploads are
/// forgotten as new ones come (the handle does not keep an upload alive).
pub fn track_upload(upload: rasterpack_store::UploadAborter) {
    let mut list = uploads();
    list.retain(|u| u.is_live());
    list.push(upload);
}

/// Run `create` (which makes the temporary file at the path it returns) so that a signal
/// handled from now on removes that file.
pub fn track<T>(create: impl FnOnce() -> std::io::Result<(PathBuf, T)>) -> std::io::Result<(PathBuf, T)> {
    let mut slot = pending();
    let made = create()?;
    *slot = Some(made.0.clone());
    Ok(made)
}

/// Run `finish` (which renames or removes the tracked file) and stop tracking it.
pub fn untrack<T>(finish: impl FnOnce() -> T) -> T {
    let mut slot = pending();
    let out = finish();
    *slot = None;
    out
}

/// Run `finish` (which puts the tracked output in place) under the lock, still tracking it:
/// a signal handled before it removes the output, one handled after finds it in place (and
/// the caller's [`untrack`] then stops tracking a path that is gone).
pub fn locked<T>(finish: impl FnOnce() -> T) -> T {
    let _slot = pending();
    finish()
}

/// Whether `path` is the file currently tracked (for tests of this module).
#[cfg(test)]
fn is_tracked(path: &std::path::Path) -> bool {
    pending().as_deref() == Some(path)
}

/// Install the handlers once per process. Without Unix signals this does nothing.
pub fn install() {
    #[cfg(unix)]
    unix::install();
}

#[cfg(unix)]
mod unix {
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Once};

    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};
    use signal_hook::iterator::Signals;

    use super::pending;

    pub fn install() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            // With a handler in place the kernel no longer kills the process when a write
            // crosses RLIMIT_FSIZE: the write fails with EFBIG and the usual error path (exit 2,
            // temporary file removed) runs. The flag itself is never read.
            let _ = signal_hook::flag::register(SIGXFSZ, Arc::new(AtomicBool::new(false)));
            let Ok(mut signals) = Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
                return;
            };
            let _ = std::thread::Builder::new()
                .name("rasterpack-signals".into())
                .spawn(move || {
                    if let Some(signal) = signals.forever().next() {
                        super::TERMINATING.store(true, std::sync::atomic::Ordering::SeqCst);
                        // Keep the lock to the end: no rename may follow the removal.
                        let slot = pending();
                        if let Some(path) = slot.as_deref() {
                            // A Zarr store's temporary output is a directory.
                            if path.is_dir() {
                                let _ = std::fs::remove_dir_all(path);
                            } else {
                                let _ = std::fs::remove_file(path);
                            }
                        }
                        // Every upload still open is aborted: no object, no parts left behind.
                        // (An upload completing meanwhile completes first; the object is then
                        // whole, as a file renamed into place before the signal was handled.)
                        for upload in super::uploads().iter() {
                            let _ = upload.abort();
                        }
                        // A dataset uploaded under a prefix: every object it put is deleted.
                        let remote = super::remote();
                        if let Some(cleanup) = remote.as_ref() {
                            cleanup();
                        }
                        // End by the same signal, so the parent sees how the process ended
                        // (a shell reports 128 + signal, 130 for Ctrl-C).
                        let _ = signal_hook::low_level::emulate_default_handler(signal);
                        std::process::exit(128 + signal);
                    }
                });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_between_create_and_finish() {
        let path = std::env::temp_dir().join(format!("rp-signals-{}", std::process::id()));
        let (p, ()) = track(|| std::fs::write(&path, b"x").map(|_| (path.clone(), ()))).unwrap();
        assert!(is_tracked(&p));
        untrack(|| std::fs::remove_file(&p)).unwrap();
        assert!(!is_tracked(&p));
        // A failed create tracks nothing.
        assert!(track(|| Err::<(PathBuf, ()), _>(std::io::Error::other("no"))).is_err());
        assert!(pending().is_none());
    }
}
