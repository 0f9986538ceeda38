//! One datatable descriptor's own rules: its names, type bits, compression, checksum, memory
//! range, data size against the shape, and the rules of its hint. The errors found here are
//! the table's faults (they make it unreadable); nothing else is.

use super::dataset::Names;
use super::walk::Walker;
use crate::codes::*;
use crate::compress;
use crate::document::UdfTable;
use crate::parse::{self, Shape};
use crate::raw::{desc_field as F, Descriptor, FileOffset, Hint, Prim};

/// Where a descriptor sits: its dataset (index, location, where its data starts), its index
/// and absolute offset, and the tag findings use.
pub(super) struct DescAt<'a> {
    pub(super) tag: &'a str,
    pub(super) ds: usize,
    pub(super) loc: FileOffset,
    pub(super) data_base: Option<u64>,
    pub(super) k: usize,
    pub(super) at: u64,
}

/// The table's data placement as the memory range and dataset header say.
struct Layout {
    ok: bool,
    data_offset: Option<u64>,
}

impl Walker<'_> {
    /// Decode and judge the descriptor `d` found at `here`.
    pub(super) fn table(&mut self, here: &DescAt<'_>, d: Descriptor, names: &Names) -> UdfTable {
        let mark = self.doc.findings.len();
        let (tag, k, at) = (here.tag, here.k, here.at);
        let [name, index_name, related_name, type_name] = self.resolve_names(here, &d, names);
        let tt = match &name {
            Some(n) => format!("{tag}.table[{k}] ({n})"),
            None => format!("{tag}.table[{k}]"),
        };
        let ti = parse::type_info(d.type_info);
        self.type_rules(&tt, at, &d, ti);
        let compressed = self.storage_rules(&tt, at, &d, ti.prim);
        let mut shape = Shape::decode(ti.dims, d.data_shape);
        if empty_strings_form(ti.hint, &shape, d.data_size, compressed) {
            // The reference's list of n empty strings: n rows of width 0 (a ghost axis of 0,
            // which `ghost_rules` accepts with a compatibility warning).
            shape.axes.push(0);
        }
        if shape.gap {
            self.err(
                SHAPE_GHOST_GAP,
                Some(at + F::DATA_SHAPE),
                format!("{tt}: ghost axes {:?} contain 0", shape.ghost()),
            );
        }
        let layout = self.memory_rules(&tt, at, &d, here.loc, here.data_base);
        let size_ok = compressed || self.size_rule(&tt, at, &d, ti.prim, &shape);
        let hint_ok = self.hint_rules(&tt, at, &d, ti.prim, ti.hint, &shape);
        UdfTable {
            dataset: here.ds,
            index: k,
            desc_offset: at,
            desc: d,
            name,
            index_name,
            related_name,
            type_name,
            prim: ti.prim,
            hint: ti.hint,
            shape,
            compressed,
            data_offset: layout.data_offset,
            data_size: d.data_size as u64,
            layout_ok: layout.ok,
            size_ok,
            hint_ok,
            index_target: None,
            // The first only (see `UdfTable::faults`).
            faults: self.errors_since(mark).into_iter().take(1).collect(),
        }
    }

    /// `key_name` (never null), `index_name`, `related_name` and `type_name` resolved through
    /// the string lookup.
    fn resolve_names(&mut self, here: &DescAt<'_>, d: &Descriptor, names: &Names) -> [Option<String>; 4] {
        let tt = format!("{}.table[{}]", here.tag, here.k);
        if d.key_name == 0 {
            self.err(
                TABLE_NULL_KEY,
                Some(here.at + F::KEY_NAME),
                format!("{tt}: key_name is null"),
            );
        }
        let fields = [
            (d.key_name, F::KEY_NAME, "key_name"),
            (d.index_name, F::INDEX_NAME, "index_name"),
            (d.related_name, F::RELATED_NAME, "related_name"),
            (d.type_name, F::TYPE_NAME, "type_name"),
        ];
        fields.map(|(key, field, what)| {
            if key == 0 {
                return None;
            }
            self.work += 1;
            match names.get(key) {
                Some(s) => s.clone(),
                None => {
                    self.err(
                        TABLE_NAME_NOT_FOUND,
                        Some(here.at + field),
                        format!("{tt}: {what} {key:#x} not in the string lookup"),
                    );
                    None
                }
            }
        })
    }

    /// Reserved bits, primitives and hints of `type_info`.
    fn type_rules(&mut self, tt: &str, at: u64, d: &Descriptor, ti: parse::TypeInfo) {
        if ti.reserved_bits != 0 {
            self.err(
                TABLE_RESERVED_BITS,
                Some(at + F::TYPE_INFO),
                format!("{tt}: type_info {:#06x} sets reserved bits", d.type_info),
            );
        }
        if let Prim::Reserved(p) = ti.prim {
            self.err(
                TABLE_RESERVED_PRIM,
                Some(at + F::TYPE_INFO),
                format!("{tt}: primitive {p:#x} is reserved"),
            );
        }
        match ti.hint {
            Hint::Reserved(v) => self.err(
                TABLE_RESERVED_HINT,
                Some(at + F::TYPE_INFO + 1),
                format!("{tt}: hint {v} is reserved"),
            ),
            Hint::Custom(32) => self.err(
                TABLE_HINT_32,
                Some(at + F::TYPE_INFO + 1),
                format!("{tt}: hint 32 (custom hints are those above 32)"),
            ),
            Hint::Line => self.err(
                HINT_LINE,
                Some(at + F::TYPE_INFO + 1),
                format!("{tt}: LINE hint is unspecified (TODO in the spec)"),
            ),
            _ => {}
        }
    }

    /// Compression, checksum and the reserved word; true when the table is compressed.
    fn storage_rules(&mut self, tt: &str, at: u64, d: &Descriptor, prim: Prim) -> bool {
        let compressed = d.compress_info != 0;
        if compressed {
            let what = if d.compress_info == compress::SIMPLE_U32 && prim.size() == Some(4) {
                "the reference crate's SimpleU32 scheme, which rasterpack decodes".to_string()
            } else if d.compress_info == compress::SIMPLE_U32 {
                format!(
                    "the reference crate's SimpleU32 scheme on {}, not decodable",
                    prim.name()
                )
            } else {
                "an unknown scheme; data not decodable".to_string()
            };
            self.err(
                TABLE_COMPRESSED,
                Some(at + F::COMPRESS_INFO),
                format!(
                    "{tt}: compress_info {} (the spec defines no compression): {what}",
                    d.compress_info
                ),
            );
        }
        if d.checksum != 0 {
            self.err(
                TABLE_CHECKSUM,
                Some(at + F::CHECKSUM),
                format!("{tt}: checksum {:#x} not verified (algorithm unspecified)", d.checksum),
            );
        }
        if d.reserved != 0 {
            self.err(
                TABLE_RESERVED,
                Some(at + F::RESERVED),
                format!("{tt}: reserved {:#x} non-zero", d.reserved),
            );
        }
        compressed
    }

    /// The memory range: ordered, large enough for `data_size`, inside the dataset.
    fn memory_rules(&mut self, tt: &str, at: u64, d: &Descriptor, loc: FileOffset, data_base: Option<u64>) -> Layout {
        let mut ok = true;
        match (d.mem_end as u64).checked_sub(d.mem_start as u64) {
            None => {
                self.err(
                    TABLE_MEM_RANGE,
                    Some(at + F::MEM_START),
                    format!(
                        "{tt}: mem {}..{} ends before it starts (data_size {})",
                        d.mem_start, d.mem_end, d.data_size
                    ),
                );
                ok = false;
            }
            Some(s) if d.data_size as u64 > s * 8 => {
                self.err(
                    TABLE_DATA_EXCEEDS_MEM,
                    Some(at + F::DATA_SIZE),
                    format!(
                        "{tt}: data_size {} > {} bytes of mem {}..{}",
                        d.data_size,
                        s * 8,
                        d.mem_start,
                        d.mem_end
                    ),
                );
                ok = false;
            }
            _ => {}
        }
        let Some(base) = data_base else {
            return Layout {
                ok: false,
                data_offset: None,
            };
        };
        let end = (base - loc.offset) + d.mem_end as u64 * 8;
        if ok && end > loc.size {
            self.err(
                TABLE_OUT_OF_BOUNDS,
                Some(at + F::MEM_END),
                format!("{tt}: data end {end} > dataset size {}", loc.size),
            );
            ok = false;
        }
        Layout {
            ok,
            data_offset: Some(base + d.mem_start as u64 * 8),
        }
    }

    /// `data_size` against the shape times the primitive size (custom primitives: any size).
    fn size_rule(&mut self, tt: &str, at: u64, d: &Descriptor, prim: Prim, shape: &Shape) -> bool {
        let Some(sz) = prim.size() else {
            return true;
        };
        let want = (shape.elements() as u128) * sz as u128;
        if want != d.data_size as u128 {
            self.err(
                TABLE_SHAPE_SIZE,
                Some(at + F::DATA_SIZE),
                format!("{tt}: shape {:?} x {sz} != data_size {}", shape.axes, d.data_size),
            );
            return false;
        }
        true
    }

    /// Primitive, ghost-axis and index_name rules of the hint; true when they all hold.
    fn hint_rules(&mut self, tt: &str, at: u64, d: &Descriptor, prim: Prim, hint: Hint, shape: &Shape) -> bool {
        let mut ok = true;
        let indexing = matches!(hint, Hint::Index | Hint::Range);
        if indexing && d.index_name == 0 {
            self.err(
                INDEX_NAME_REQUIRED,
                Some(at + F::INDEX_NAME),
                format!("{tt}: {} needs index_name", hint.name()),
            );
            ok = false;
        } else if !indexing && d.index_name != 0 {
            self.err(
                INDEX_NAME_NOT_ALLOWED,
                Some(at + F::INDEX_NAME),
                format!("{tt}: index_name on hint {}", hint.value()),
            );
        }
        let (prim_ok, ghost_ok) = hint_allows(hint, prim, shape.ghost());
        if !prim_ok {
            self.err(
                HINT_BAD_PRIM,
                Some(at + F::TYPE_INFO),
                format!("{tt}: {} with primitive {}", hint.name(), prim.name()),
            );
            // The ghost-axis rules assume the hint's primitive: judge them only then.
            return false;
        }
        if shape.gap {
            return false;
        }
        let ghost_ok = self.ghost_rules(tt, at, hint, shape, ghost_ok);
        ok && ghost_ok
    }

    /// The ghost axes a hint allows, with the reference writer's forms that are accepted with
    /// a compatibility warning (see `docs/formats/udf.md`).
    fn ghost_rules(&mut self, tt: &str, at: u64, hint: Hint, shape: &Shape, ghost_ok: bool) -> bool {
        let g = shape.ghost();
        let (code, message) = if hint == Hint::Transform && (g == [6] || g == [12]) {
            (
                HINT_TRANSFORM_FLAT,
                format!("{tt}: transform with one ghost axis {g:?} (the reference crate's form; the spec wants two)"),
            )
        } else if hint == Hint::Text && shape.dims == 1 && g == [0] {
            (
                TEXT_EMPTY_STRINGS_NO_GHOST,
                format!(
                    "{tt}: text list of {} empty strings stored as shape [{0}, 0] with no data, without a \
                     ghost axis (the reference writer's form); read as {0} rows of width 0",
                    shape.axes[0]
                ),
            )
        } else if ghost_ok {
            return true;
        } else if hint == Hint::None {
            (
                HINT_GHOST_ON_NONE,
                format!(
                    "{tt}: NONE with ghost axes {g:?}, which the spec forbids (the reference writer's form of \
                     single values and arrays of arrays); read as shape {:?}",
                    shape.axes
                ),
            )
        } else if hint == Hint::Text && shape.dims == 1 && shape.axes == [0] {
            (
                TEXT_EMPTY_LIST_NO_GHOST,
                format!(
                    "{tt}: empty text list stored as shape [0, 0] without a ghost axis (the reference writer's form)"
                ),
            )
        } else {
            self.err(
                HINT_GHOST_DIMS,
                Some(at + F::DATA_SHAPE),
                format!("{tt}: {} with ghost axes {g:?}", hint.name()),
            );
            return false;
        };
        // The accepted forms are warnings: the table reads.
        self.err(code, Some(at + F::DATA_SHAPE), message);
        true
    }
}

/// The reference crate's `build_string_array` of `n > 0` empty strings: a 1-D TEXT table
/// stored as `[n, 0]` (no ghost axis) with no data bytes.
fn empty_strings_form(hint: Hint, shape: &Shape, data_size: u32, compressed: bool) -> bool {
    hint == Hint::Text && shape.dims == 1 && shape.axes.len() == 1 && shape.axes[0] > 0 && data_size == 0 && !compressed
}

/// Does `hint` allow primitive `prim` and these ghost axes? `(prim ok, ghost axes ok)`.
/// (TRANSFORM's single 6 / 12 axis, a warning, is left to the caller.)
pub(crate) fn hint_allows(hint: Hint, prim: Prim, g: &[u32]) -> (bool, bool) {
    use Prim::*;
    let prims: &[Prim] = match hint {
        Hint::Text => &[U8, I8, U16, U32],
        Hint::Json => &[Custom],
        Hint::Dataset => &[U64],
        Hint::Index | Hint::Range => &[U8, U16, U32, U64],
        Hint::Coord => &[I8, I16, I32, I64, F32, F64],
        Hint::Line | Hint::Transform => &[F32, F64],
        Hint::Rgb => &[U8, F32],
        _ => &[],
    };
    let prim_ok = prims.is_empty() || prims.contains(&prim);
    let ghost_ok = match hint {
        Hint::None | Hint::Json => g.is_empty(),
        Hint::Text | Hint::Coord => g.len() == 1,
        Hint::Dataset | Hint::Range => g == [2],
        Hint::Rgb => g == [3] || g == [4],
        Hint::Transform => g.len() == 2,
        _ => true,
    };
    (prim_ok, ghost_ok)
}
