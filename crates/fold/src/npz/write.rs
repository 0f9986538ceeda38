//! Writing `.npz` archives: whole (`np.savez` layout: stored members, sizes and CRC-32 in
//! the local headers), or one member as it streams (sizes in the local header, CRC-32 in a
//! data descriptor after the data, flag bit 3: the CRC is only known at the end, and the
//! member's bytes may not be revisited because they are hashed as they are written).

use rasterpack_common::{npy, NdArray};

use super::zip::{crc32, CDIR_SIG, EOCD_SIG, FLAG_DESCRIPTOR, FLAG_UTF8, LOCAL_SIG};

/// An `np.savez`-style archive: stored members `<name>.npy`.
pub fn write(arrays: &[(&str, &NdArray)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, arr) in arrays {
        let mut member = npy::header_bytes(arr.dtype, &arr.shape);
        member.extend_from_slice(&arr.data);
        let fname = format!("{name}.npy");
        // Python's zipfile (numpy) marks names that are not ASCII as UTF-8; without the flag
        // readers decode them as CP437.
        let flags = if fname.is_ascii() { 0u16 } else { FLAG_UTF8 };
        let crc = crc32(&member);
        let offset = out.len() as u32;
        let size = member.len() as u32;
        // local header: version 20, flags (bit 11 or none), stored, DOS time 1980-01-01 00:00
        out.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0x21, 0]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(fname.as_bytes());
        out.extend_from_slice(&member);
        central.extend_from_slice(&CDIR_SIG.to_le_bytes());
        central.extend_from_slice(&[20, 3, 20, 0]);
        central.extend_from_slice(&flags.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0, 0, 0x21, 0]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&(fname.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // extra, comment, disk, internal attrs
        central.extend_from_slice(&(0o100644u32 << 16).to_le_bytes()); // external attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(fname.as_bytes());
    }
    let cd_off = out.len() as u32;
    let n = arrays.len() as u16;
    out.extend_from_slice(&central);
    out.extend_from_slice(&EOCD_SIG.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_off.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Data descriptor signature.
const DESCRIPTOR_SIG: u32 = 0x0807_4b50;

/// One stored member written as it streams: `local_header`, the content, `descriptor`, then
/// `directory` (central directory and end record). Sizes must be below 4 GiB (FOLD chunks
/// are at most 1 GiB).
pub(crate) struct StreamedMember {
    fname: String,
    flags: u16,
    size: u32,
}

impl StreamedMember {
    /// A member `<name>.npy` of `size` content bytes.
    pub(crate) fn new(name: &str, size: u32) -> StreamedMember {
        let fname = format!("{name}.npy");
        let utf8 = if fname.is_ascii() { 0u16 } else { FLAG_UTF8 };
        StreamedMember {
            fname,
            flags: utf8 | FLAG_DESCRIPTOR,
            size,
        }
    }

    /// The local header (CRC-32 0: it follows in the descriptor; sizes as they will be).
    pub(crate) fn local_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(30 + self.fname.len());
        out.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0x21, 0]);
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.fname.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(self.fname.as_bytes());
        out
    }

    /// The data descriptor after the content.
    pub(crate) fn descriptor(&self, crc: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&DESCRIPTOR_SIG.to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out
    }

    /// Central directory (one entry) and end record; the member's local header is at 0 and the
    /// directory at `cd_offset`.
    pub(crate) fn directory(&self, crc: u32, cd_offset: u32) -> Vec<u8> {
        let mut central = Vec::with_capacity(46 + self.fname.len() + 22);
        central.extend_from_slice(&CDIR_SIG.to_le_bytes());
        central.extend_from_slice(&[20, 3, 20, 0]);
        central.extend_from_slice(&self.flags.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0, 0, 0x21, 0]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&self.size.to_le_bytes());
        central.extend_from_slice(&self.size.to_le_bytes());
        central.extend_from_slice(&(self.fname.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        central.extend_from_slice(&(0o100644u32 << 16).to_le_bytes());
        central.extend_from_slice(&0u32.to_le_bytes());
        central.extend_from_slice(self.fname.as_bytes());
        let cd_len = central.len() as u32;
        central.extend_from_slice(&EOCD_SIG.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0, 0]);
        central.extend_from_slice(&1u16.to_le_bytes());
        central.extend_from_slice(&1u16.to_le_bytes());
        central.extend_from_slice(&cd_len.to_le_bytes());
        central.extend_from_slice(&cd_offset.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central
    }
}
