//! A Zarr store under an object-store prefix ([`Input::Objects`](rasterpack_common::Input)),
//! as a zarrs store: the reader then opens it exactly as it opens a directory, and every
//! request goes through the [`ObjectSource`] that VDS datasets are read through too (its
//! bounded concurrency, retries, size checks and request log).

use std::sync::Arc;

use rasterpack_common::{Limits, ObjectSource};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey,
    StoreKeys, StoreKeysPrefixes, StorePrefix, StorePrefixes,
};

/// An [`ObjectSource`] read as a zarrs store, within `limits` (each value's size is checked
/// against `limits.max_alloc` before it is fetched).
#[derive(Debug)]
pub struct ObjectStorage {
    source: Arc<dyn ObjectSource>,
    limits: Limits,
}

impl ObjectStorage {
    /// The store over `source`.
    pub fn new(source: Arc<dyn ObjectSource>, limits: Limits) -> ObjectStorage {
        ObjectStorage { source, limits }
    }
}

/// Why [`ObjectStorage::get_capped`] returned no bytes.
#[derive(Debug)]
pub enum Capped {
    /// The object is larger than the cap asked for.
    TooLarge(rasterpack_common::Error),
    /// The request failed (or the object is above the store's own allocation limit).
    Failed(rasterpack_common::Error),
}

fn storage_error(e: rasterpack_common::Error) -> StorageError {
    StorageError::Other(e.to_string())
}

impl ObjectStorage {
    /// One range of `key` (`None`: no such object).
    fn range(&self, key: &str, range: ByteRange) -> Result<Option<Bytes>, StorageError> {
        let mut buf = Vec::new();
        let found = match range {
            ByteRange::FromStart(0, None) => self.source.get_into(key, &mut buf, &self.limits),
            ByteRange::FromStart(offset, Some(len)) => {
                self.source.get_range_into(key, offset, len, &mut buf, &self.limits)
            }
            // Ranges measured from the end need the size first.
            ByteRange::FromStart(offset, None) => match self.source.size(key).map_err(storage_error)? {
                None => return Ok(None),
                Some(size) => {
                    let len = size.checked_sub(offset).ok_or_else(|| {
                        StorageError::Other(format!("{key}: offset {offset} past the object's {size} bytes"))
                    })?;
                    self.source.get_range_into(key, offset, len, &mut buf, &self.limits)
                }
            },
            ByteRange::Suffix(len) => match self.source.size(key).map_err(storage_error)? {
                None => return Ok(None),
                Some(size) => {
                    let offset = size.checked_sub(len).ok_or_else(|| {
                        StorageError::Other(format!("{key}: the last {len} bytes of an object of {size}"))
                    })?;
                    self.source.get_range_into(key, offset, len, &mut buf, &self.limits)
                }
            },
        }
        .map_err(storage_error)?;
        Ok(found.then(|| Bytes::from(buf)))
    }

    /// Object `key` whole in one GET, refused when the response says it holds more than `cap`
    /// bytes (before any of its body is read): a remote chunk then costs one request, where
    /// asking its size first would cost two. `Ok(None)`: no such object. `Err(Capped)`: larger
    /// than `cap` (the store's message says how large).
    pub fn get_capped(&self, key: &str, cap: u64) -> Result<Option<Vec<u8>>, Capped> {
        let limits = Limits {
            max_alloc: cap.min(self.limits.max_alloc),
            ..self.limits
        };
        let mut buf = Vec::new();
        match self.source.get_into(key, &mut buf, &limits) {
            Ok(true) => Ok(Some(buf)),
            Ok(false) => Ok(None),
            Err(e) if e.kind == rasterpack_common::ErrorKind::LimitExceeded && cap < self.limits.max_alloc => {
                Err(Capped::TooLarge(e))
            }
            Err(e) => Err(Capped::Failed(e)),
        }
    }

    fn keys(list: Vec<String>) -> Result<StoreKeys, StorageError> {
        list.into_iter()
            .map(|k| StoreKey::new(k).map_err(|e| StorageError::Other(e.to_string())))
            .collect()
    }
}

impl ReadableStorageTraits for ObjectStorage {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        self.range(key.as_str(), ByteRange::FromStart(0, None))
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let mut out = Vec::new();
        for r in byte_ranges {
            match self.range(key.as_str(), r)? {
                Some(b) => out.push(Ok(b)),
                None => return Ok(None),
            }
        }
        Ok(Some(Box::new(out.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.source.size(key.as_str()).map_err(storage_error)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl ListableStorageTraits for ObjectStorage {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.list_prefix(&StorePrefix::root())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        let listed = self.source.list(prefix.as_str(), &self.limits).map_err(storage_error)?;
        Self::keys(listed.into_iter().map(|(k, _)| k).collect())
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        let (keys, dirs) = self
            .source
            .list_dir(prefix.as_str(), &self.limits)
            .map_err(storage_error)?;
        let prefixes: StorePrefixes = dirs
            .into_iter()
            .map(|d| StorePrefix::new(d).map_err(|e| StorageError::Other(e.to_string())))
            .collect::<Result<_, _>>()?;
        Ok(StoreKeysPrefixes::new(Self::keys(keys)?, prefixes))
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        let listed = self.source.list(prefix.as_str(), &self.limits).map_err(storage_error)?;
        Ok(listed.iter().map(|(_, n)| n).sum())
    }
}
