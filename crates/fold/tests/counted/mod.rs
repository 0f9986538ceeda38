//! A FOLD file in memory that counts the bytes read from it (and can be changed while open):
//! what `read_once.rs` and `stats_once.rs` observe a read through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rasterpack_common::{RangeSource, Result};

#[derive(Debug)]
pub struct Counted {
    pub bytes: Mutex<Vec<u8>>,
    pub read: AtomicU64,
}

impl RangeSource for Counted {
    fn name(&self) -> String {
        "counted".into()
    }
    fn len(&self) -> u64 {
        self.bytes.lock().unwrap().len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let b = self.bytes.lock().unwrap();
        buf.copy_from_slice(&b[offset as usize..offset as usize + buf.len()]);
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}
