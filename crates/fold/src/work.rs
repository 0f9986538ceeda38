//! A count of elementary steps (key comparisons, members visited) for tests that bound the
//! *work* a hostile input causes rather than its time: a walk that compares every key with
//! every other shows up as `n^2` ticks whatever the machine. Compiled to nothing outside the
//! crate's own tests.

#[cfg(test)]
thread_local! {
    static TICKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Count `n` elementary steps (no-op outside tests).
#[inline(always)]
pub(crate) fn tick(n: u64) {
    #[cfg(test)]
    TICKS.with(|t| t.set(t.get().saturating_add(n)));
    #[cfg(not(test))]
    let _ = n;
}

/// Steps counted on this thread since the last call.
#[cfg(test)]
pub(crate) fn take() -> u64 {
    TICKS.with(|t| t.replace(0))
}
