//! [`SinkWrapper`]: a sink that passes an array on to another one, written as only what it
//! changes.
//!
//! The trait is implemented by path (`impl rasterpack_common::SinkWrapper for ...`), not
//! imported: with it and [`ArraySink`] both in scope, a hook called on a wrapper names two
//! methods (the wrapper's and the [`ArraySink`] made from it) and does not compile. The same
//! holds inside an `impl SinkWrapper` whose inner sink is itself a wrapper type: call the
//! inner hook as `ArraySink::finish(&mut self.inner)`.

use crate::error::Result;
use crate::stream::{ArrayInfo, ArraySink, Interrupt, ParallelBlocks, ParallelFile};

/// A sink that passes an array on to another one and changes only part of what it does (checks
/// at `begin`, counts, polls, a finish under a lock): it implements this trait instead of
/// [`ArraySink`], names its inner sink, and overrides only the hooks it changes; every other
/// hook goes to the inner sink as it is (an [`ArraySink`] comes with it, below). A new hook of
/// [`ArraySink`] is added here and in that one impl, so no wrapper can forget to pass it on and
/// quietly lose a fast path (`parallel_blocks`) or Ctrl-C (`interrupt`).
///
/// Forwarding is the default, so a wrapper that looks at or changes the bytes in `write_at` or
/// `fill_at` must say `None` for the hooks that bypass them (`parallel_file`, `parallel_blocks`,
/// `direct_buffer`, `direct_buffer_polled`) and refuse `written_elsewhere` with
/// [`crate::written_without_handle`]: see [`crate::ViewSink`] and [`crate::ProgressSink`].
///
/// ```
/// use rasterpack_common::{ArrayInfo, ArraySink, Result};
///
/// /// Counts the arrays begun; everything else passes through.
/// struct Begins<S> {
///     inner: S,
///     begun: u32,
/// }
///
/// impl<S: ArraySink> rasterpack_common::SinkWrapper for Begins<S> {
///     type Inner = S;
///     fn inner(&mut self) -> &mut S {
///         &mut self.inner
///     }
///     fn inner_ref(&self) -> &S {
///         &self.inner
///     }
///     fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
///         self.begun += 1;
///         self.inner.begin(info)
///     }
/// }
/// ```
pub trait SinkWrapper {
    /// The sink everything not overridden goes to.
    type Inner: ArraySink + ?Sized;
    /// The inner sink.
    fn inner(&mut self) -> &mut Self::Inner;
    /// The inner sink, for the hooks that take `&self`.
    fn inner_ref(&self) -> &Self::Inner;

    /// [`ArraySink::begin`].
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        self.inner().begin(info)
    }
    /// [`ArraySink::random_access`].
    fn random_access(&self) -> bool {
        self.inner_ref().random_access()
    }
    /// [`ArraySink::write_at`].
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner().write_at(offset, data)
    }
    /// [`ArraySink::fill_at`].
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        self.inner().fill_at(offset, len, pattern)
    }
    /// [`ArraySink::direct_buffer`].
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        self.inner().direct_buffer()
    }
    /// [`ArraySink::parallel_file`].
    fn parallel_file(&mut self) -> Option<ParallelFile> {
        self.inner().parallel_file()
    }
    /// [`ArraySink::parallel_blocks`].
    fn parallel_blocks(&mut self) -> Option<ParallelBlocks> {
        self.inner().parallel_blocks()
    }
    /// [`ArraySink::takes_blocks`].
    fn takes_blocks(&self) -> bool {
        self.inner_ref().takes_blocks()
    }
    /// [`ArraySink::blocks_before_begin`].
    fn blocks_before_begin(&mut self, info: &ArrayInfo) -> Option<ParallelBlocks> {
        self.inner().blocks_before_begin(info)
    }
    /// [`ArraySink::written_elsewhere`].
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        self.inner().written_elsewhere(len)
    }
    /// [`ArraySink::direct_buffer_polled`].
    fn direct_buffer_polled(&mut self) -> Option<&mut [u8]> {
        self.inner().direct_buffer_polled()
    }
    /// [`ArraySink::interrupt`].
    fn interrupt(&self) -> Option<Interrupt> {
        self.inner_ref().interrupt()
    }
    /// [`ArraySink::finish`].
    fn finish(&mut self) -> Result<()> {
        self.inner().finish()
    }
}

// Every hook listed, none left to the trait's default: `cargo clippy` refuses a hook added to
// `ArraySink` and not here (and `testkit::HookProbe` is held to the same).
#[deny(clippy::missing_trait_methods)]
impl<W: SinkWrapper> ArraySink for W {
    fn begin(&mut self, info: &ArrayInfo) -> Result<()> {
        SinkWrapper::begin(self, info)
    }
    fn random_access(&self) -> bool {
        SinkWrapper::random_access(self)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        SinkWrapper::write_at(self, offset, data)
    }
    fn fill_at(&mut self, offset: u64, len: u64, pattern: &[u8]) -> Result<()> {
        SinkWrapper::fill_at(self, offset, len, pattern)
    }
    fn direct_buffer(&mut self) -> Option<&mut [u8]> {
        SinkWrapper::direct_buffer(self)
    }
    fn parallel_file(&mut self) -> Option<ParallelFile> {
        SinkWrapper::parallel_file(self)
    }
    fn parallel_blocks(&mut self) -> Option<ParallelBlocks> {
        SinkWrapper::parallel_blocks(self)
    }
    fn takes_blocks(&self) -> bool {
        SinkWrapper::takes_blocks(self)
    }
    fn blocks_before_begin(&mut self, info: &ArrayInfo) -> Option<ParallelBlocks> {
        SinkWrapper::blocks_before_begin(self, info)
    }
    fn written_elsewhere(&mut self, len: u64) -> Result<()> {
        SinkWrapper::written_elsewhere(self, len)
    }
    fn direct_buffer_polled(&mut self) -> Option<&mut [u8]> {
        SinkWrapper::direct_buffer_polled(self)
    }
    fn interrupt(&self) -> Option<Interrupt> {
        SinkWrapper::interrupt(self)
    }
    fn finish(&mut self) -> Result<()> {
        SinkWrapper::finish(self)
    }
}

impl<S: ArraySink + ?Sized> SinkWrapper for &mut S {
    type Inner = S;
    fn inner(&mut self) -> &mut S {
        self
    }
    fn inner_ref(&self) -> &S {
        self
    }
}

impl<S: ArraySink + ?Sized> SinkWrapper for Box<S> {
    type Inner = S;
    fn inner(&mut self) -> &mut S {
        self
    }
    fn inner_ref(&self) -> &S {
        self
    }
}
