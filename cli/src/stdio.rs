//! Whether standard output was open when the process started.
//!
//! Rust's runtime reopens a closed descriptor 0, 1 or 2 on `/dev/null` before `main` runs, so
//! a report written to a closed stdout (`rasterpack inspect f >&-`) would "succeed" into
//! nothing and exit 0. The probe below runs earlier, as an ELF constructor, and remembers what
//! it saw; commands that write to stdout then refuse to start (exit 2).

use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// True when descriptor 1 was closed at process start.
pub fn stdout_was_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

#[cfg(target_os = "linux")]
mod probe {
    use std::os::fd::AsFd;

    /// Runs before the runtime's fd sanitising: a `dup` of a closed descriptor fails (EBADF).
    extern "C" fn probe() {
        let closed = std::io::stdout().as_fd().try_clone_to_owned().is_err();
        super::STDOUT_CLOSED.store(closed, super::Ordering::Relaxed);
    }

    // Entries of `.init_array` are called by the dynamic loader (or the static start code)
    // before `main`, after relocations: plain function pointers, no runtime needed.
    #[used]
    #[link_section = ".init_array"]
    static PROBE: extern "C" fn() = probe;
}
