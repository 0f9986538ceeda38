//! Resource limits applied to untrusted input before anything is allocated.

/// Conservative bounds on what a single input may make rasterpack allocate or do.
///
/// Format crates combine these with the limits their spec documents (VOLP: 1 MiB header and
/// 256 MiB body; FOLD: 100 MiB index and 1 GiB chunks) and use the smaller. Construct with
/// [`Limits::default`] for untrusted files, or [`Limits::unlimited`] for trusted ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest single buffer a parser may allocate from a size read out of the file.
    pub max_alloc: u64,
    /// Largest JSON / text document (header, index, metadata) read as a whole.
    pub max_text: u64,
    /// Largest decoded array the high-level API will materialise in memory.
    pub max_array_bytes: u64,
    /// Deepest nesting a recursive walk (dataset graphs, JSON) may reach.
    pub max_depth: u32,
    /// Largest number of entries a directory/table/list may declare.
    pub max_entries: u64,
    /// Working-set budget of a streaming read or write: the buffers for bands of tiles, slabs of
    /// bricks and decoded frames in flight together stay under it, whatever the array's size.
    pub working_set: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_alloc: 1 << 30,
            max_text: 100 << 20,
            max_array_bytes: 4 << 30,
            max_depth: 64,
            max_entries: 1 << 24,
            working_set: 96 << 20,
        }
    }
}

impl Limits {
    /// No limits beyond what the address space allows: for trusted files only.
    pub fn unlimited() -> Self {
        Limits {
            max_alloc: u64::MAX,
            max_text: u64::MAX,
            max_array_bytes: u64::MAX,
            max_depth: u32::MAX,
            max_entries: u64::MAX,
            working_set: u64::MAX,
        }
    }

    /// Check a size read out of the file against [`Limits::max_alloc`] and return it as usize.
    pub fn check_alloc(&self, bytes: u64, what: &str, offset: Option<u64>) -> crate::Result<usize> {
        if bytes > self.max_alloc {
            return Err(crate::Error::limit(
                "limit.alloc",
                offset,
                format!(
                    "{what} declares {bytes} bytes, above the limit of {} bytes",
                    self.max_alloc
                ),
            ));
        }
        usize::try_from(bytes).map_err(|_| {
            crate::Error::limit(
                "limit.alloc",
                offset,
                format!("{what} of {bytes} bytes does not fit in memory"),
            )
        })
    }
}
