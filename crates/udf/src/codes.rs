//! Every finding code `validate` can emit, its severity, and the corpus sidecar `error_code`
//! it corresponds to (the conformance corpus uses upper-case codes; rasterpack keeps dotted
//! ones). The interop test checks this mapping against every sidecar.
//!
//! Compatibility warnings (what the reference writer makes although the spec forbids it, see
//! `docs/formats/udf.md`) keep the sidecar code of the spec rule they break: the corpus lists
//! that code in `spec_findings` and calls the file `implementation_defined`.

use rasterpack_common::Severity;

/// `(code, severity, sidecar code)`; the sidecar code is `None` for warnings and infos, except
/// for the compatibility warnings.
pub const CODES: &[(&str, Severity, Option<&str>)] = &[
    // File header.
    (TRUNCATED, Severity::Error, Some("TRUNCATED")),
    (BAD_MAGIC, Severity::Error, Some("BAD_MAGIC")),
    (UNSUPPORTED_REVISION, Severity::Error, Some("UNSUPPORTED_REVISION")),
    (HEADER_RESERVED, Severity::Error, Some("RESERVED_NONZERO")),
    (HEADER_BAD_ID, Severity::Error, Some("BAD_ID")),
    (HEADER_NEXT, Severity::Warning, None),
    // File offsets (root and DATASET entries).
    (OFFSET_MISALIGNED, Severity::Error, Some("MISALIGNED_OFFSET")),
    (OFFSET_NULL_WITH_SIZE, Severity::Error, Some("NULL_OFFSET_WITH_SIZE")),
    (OFFSET_OUT_OF_BOUNDS, Severity::Error, Some("OUT_OF_BOUNDS")),
    // Datasets.
    (DATASET_BAD_CHECK, Severity::Error, Some("BAD_CHECK")),
    (DATASET_HEADER_SIZE_ALIGN, Severity::Error, Some("HEADER_SIZE_ALIGN")),
    (DATASET_HEADER_SIZE_SMALL, Severity::Error, Some("HEADER_SIZE_SMALL")),
    (DATASET_HEADER_OUT_OF_BOUNDS, Severity::Error, Some("OUT_OF_BOUNDS")),
    (DATASET_HEADER_SLACK, Severity::Warning, None),
    (DATASET_STRING_LEN_ALIGN, Severity::Error, Some("STRING_LEN_ALIGN")),
    (DATASET_RESERVED, Severity::Warning, None),
    (DATASET_CHECKSUM, Severity::Info, None),
    (DATASET_BAD_ID, Severity::Warning, None),
    (DATASET_CYCLE, Severity::Error, Some("CYCLE")),
    (DATASET_TOO_DEEP, Severity::Error, Some("DEPTH_LIMIT")),
    (DATASET_TOO_MANY, Severity::Error, Some("LIMIT")),
    // String lookup.
    (LOOKUP_HASH_ZERO, Severity::Error, Some("LOOKUP_HASH_ZERO")),
    (LOOKUP_OUT_OF_BOUNDS, Severity::Error, Some("LOOKUP_OUT_OF_BOUNDS")),
    (LOOKUP_BAD_UTF8, Severity::Error, Some("BAD_STRING")),
    (LOOKUP_DUPLICATE_HASH, Severity::Error, Some("DUPLICATE_NAME")),
    // Descriptors.
    (TABLE_NULL_KEY, Severity::Error, Some("NULL_KEY_NAME")),
    (TABLE_NAME_NOT_FOUND, Severity::Error, Some("NAME_NOT_FOUND")),
    (TABLE_DUPLICATE_NAME, Severity::Error, Some("DUPLICATE_NAME")),
    (TABLE_RESERVED_BITS, Severity::Error, Some("RESERVED_TYPE_BITS")),
    (TABLE_RESERVED_PRIM, Severity::Error, Some("RESERVED_PRIM")),
    (TABLE_RESERVED_HINT, Severity::Error, Some("RESERVED_HINT")),
    (TABLE_HINT_32, Severity::Warning, None),
    (TABLE_COMPRESSED, Severity::Warning, None),
    (TABLE_CHECKSUM, Severity::Info, None),
    (TABLE_RESERVED, Severity::Warning, None),
    (TABLE_MEM_RANGE, Severity::Error, Some("MEM_RANGE")),
    (TABLE_DATA_EXCEEDS_MEM, Severity::Error, Some("MEM_RANGE")),
    (TABLE_OUT_OF_BOUNDS, Severity::Error, Some("OUT_OF_BOUNDS")),
    (TABLE_SHAPE_SIZE, Severity::Error, Some("SHAPE_SIZE_MISMATCH")),
    (SHAPE_GHOST_GAP, Severity::Error, Some("GHOST_DIMS")),
    // Hints.
    (HINT_GHOST_DIMS, Severity::Error, Some("GHOST_DIMS")),
    (HINT_GHOST_ON_NONE, Severity::Warning, Some("GHOST_DIMS")),
    (TEXT_EMPTY_LIST_NO_GHOST, Severity::Warning, Some("GHOST_DIMS")),
    (TEXT_EMPTY_STRINGS_NO_GHOST, Severity::Warning, Some("GHOST_DIMS")),
    (HINT_BAD_PRIM, Severity::Error, Some("BAD_PRIM_FOR_HINT")),
    (HINT_LINE, Severity::Warning, None),
    (HINT_TRANSFORM_FLAT, Severity::Warning, None),
    (TEXT_INVALID, Severity::Error, Some("BAD_TEXT")),
    (COMPRESS_CORRUPT, Severity::Error, Some("BAD_COMPRESSED_DATA")),
    (JSON_INVALID, Severity::Error, Some("BAD_JSON")),
    (JSON_SHAPE, Severity::Error, Some("JSON_SHAPE")),
    (JSON_TOO_LARGE, Severity::Error, Some("LIMIT")),
    (INDEX_NAME_REQUIRED, Severity::Error, Some("INDEX_NAME_REQUIRED")),
    (INDEX_NAME_NOT_ALLOWED, Severity::Error, Some("INDEX_NAME_NOT_ALLOWED")),
    (INDEX_TARGET_MISSING, Severity::Error, Some("INDEX_TARGET_MISSING")),
    (INDEX_TARGET_DIM, Severity::Error, Some("INDEX_TARGET_DIM")),
    (INDEX_OUT_OF_RANGE, Severity::Error, Some("INDEX_OUT_OF_RANGE")),
    (RANGE_INVERTED, Severity::Error, Some("RANGE_INVERTED")),
    (RANGE_OUT_OF_RANGE, Severity::Error, Some("RANGE_OUT_OF_RANGE")),
    (RELATED_MISSING, Severity::Error, Some("RELATED_MISSING")),
    (RELATED_SHAPE, Severity::Error, Some("RELATED_SHAPE")),
    (IO, Severity::Error, Some("IO")),
    (LIMIT_WORK, Severity::Error, Some("LIMIT")),
    (CONTENT_NOT_CHECKED, Severity::Info, None),
];

/// File shorter than the 64-byte header (error).
pub const TRUNCATED: &str = "udf.header.truncated";
/// Magic is not `UDF0` (nor `UDF`+digit) (error).
pub const BAD_MAGIC: &str = "udf.header.bad_magic";
/// Magic `UDF1`.. (error).
pub const UNSUPPORTED_REVISION: &str = "udf.header.unsupported_revision";
/// File header `reserved` must be zero (error).
pub const HEADER_RESERVED: &str = "udf.header.reserved_nonzero";
/// File id: printable ASCII, NUL padded (error).
pub const HEADER_BAD_ID: &str = "udf.header.bad_id";
/// `next` is reserved but not must-be-zero (warning).
pub const HEADER_NEXT: &str = "udf.header.next_nonzero";
/// Offset or size not a multiple of 16 (error).
pub const OFFSET_MISALIGNED: &str = "udf.offset.misaligned";
/// Offset 0 with a non-zero size (error).
pub const OFFSET_NULL_WITH_SIZE: &str = "udf.offset.null_with_size";
/// Past EOF, inside the file header, or smaller than 0x18 (error).
pub const OFFSET_OUT_OF_BOUNDS: &str = "udf.offset.out_of_bounds";
/// Check value is not `0x7fcea59b` (error).
pub const DATASET_BAD_CHECK: &str = "udf.dataset.bad_check";
/// `header_size` not a multiple of 8 (error).
pub const DATASET_HEADER_SIZE_ALIGN: &str = "udf.dataset.header_size_align";
/// `header_size` < 0x18 + descriptors + lookups + strings (error).
pub const DATASET_HEADER_SIZE_SMALL: &str = "udf.dataset.header_size_small";
/// `header_size` (or the header's content) past the dataset size (error).
pub const DATASET_HEADER_OUT_OF_BOUNDS: &str = "udf.dataset.header_out_of_bounds";
/// `header_size` larger than what it holds (warning).
pub const DATASET_HEADER_SLACK: &str = "udf.dataset.header_size_slack";
/// `string_len` not a multiple of 8 (error).
pub const DATASET_STRING_LEN_ALIGN: &str = "udf.dataset.string_len_align";
/// Dataset `reserved` (not must-be-zero) (warning).
pub const DATASET_RESERVED: &str = "udf.dataset.reserved_nonzero";
/// Header checksum present, algorithm unspecified (info).
pub const DATASET_CHECKSUM: &str = "udf.dataset.checksum_unverified";
/// Dataset id not printable ASCII (warning).
pub const DATASET_BAD_ID: &str = "udf.dataset.bad_id";
/// A DATASET link closes a cycle (error).
pub const DATASET_CYCLE: &str = "udf.dataset.cycle";
/// Graph deeper than `Limits::max_depth` (error).
pub const DATASET_TOO_DEEP: &str = "udf.dataset.too_deep";
/// More datasets / links than `Limits::max_entries` (error).
pub const DATASET_TOO_MANY: &str = "udf.dataset.too_many";
/// Lookup hash 0 (error).
pub const LOOKUP_HASH_ZERO: &str = "udf.lookup.hash_zero";
/// `offset + len > string_len` (error).
pub const LOOKUP_OUT_OF_BOUNDS: &str = "udf.lookup.out_of_bounds";
/// Lookup string not UTF-8 (error).
pub const LOOKUP_BAD_UTF8: &str = "udf.lookup.bad_utf8";
/// Two lookups with one hash (error).
pub const LOOKUP_DUPLICATE_HASH: &str = "udf.lookup.duplicate_hash";
/// `key_name` 0 (error).
pub const TABLE_NULL_KEY: &str = "udf.table.null_key_name";
/// A name key not in the lookup (error).
pub const TABLE_NAME_NOT_FOUND: &str = "udf.table.name_not_found";
/// Two tables with one name (error).
pub const TABLE_DUPLICATE_NAME: &str = "udf.table.duplicate_name";
/// `type_info` bit 6 or bits 14-15 set (error).
pub const TABLE_RESERVED_BITS: &str = "udf.table.reserved_type_bits";
/// Primitive 0x01, 0x0C-0x0F or extension bit (error).
pub const TABLE_RESERVED_PRIM: &str = "udf.table.reserved_prim";
/// Hint 10..=31 (error).
pub const TABLE_RESERVED_HINT: &str = "udf.table.reserved_hint";
/// Hint 32 (custom hints are "above 32") (warning).
pub const TABLE_HINT_32: &str = "udf.table.hint_32";
/// `compress_info != 0` (unspecified): data not decodable (warning).
pub const TABLE_COMPRESSED: &str = "udf.table.compressed";
/// Table checksum present, algorithm unspecified (info).
pub const TABLE_CHECKSUM: &str = "udf.table.checksum_unverified";
/// Descriptor `reserved` (warning).
pub const TABLE_RESERVED: &str = "udf.table.reserved_nonzero";
/// `mem_end < mem_start` (error).
pub const TABLE_MEM_RANGE: &str = "udf.table.mem_range";
/// `data_size > (mem_end - mem_start) * 8` (error).
pub const TABLE_DATA_EXCEEDS_MEM: &str = "udf.table.data_exceeds_mem";
/// `header_size + mem_end * 8` past the dataset size (error).
pub const TABLE_OUT_OF_BOUNDS: &str = "udf.table.out_of_bounds";
/// `data_size != elements x primitive size` (error).
pub const TABLE_SHAPE_SIZE: &str = "udf.table.shape_size_mismatch";
/// A ghost axis is 0 before a non-zero one (error).
pub const SHAPE_GHOST_GAP: &str = "udf.shape.ghost_gap";
/// Ghost axes the hint does not allow (error).
pub const HINT_GHOST_DIMS: &str = "udf.hint.ghost_dims";
/// Ghost axes under hint NONE (the reference writer's single values and arrays of arrays);
/// read as part of the shape (warning).
pub const HINT_GHOST_ON_NONE: &str = "udf.hint.ghost_on_none";
/// Empty 1-D text list stored as `[0, 0]` (the reference's `build_string_array` of no items) (warning).
pub const TEXT_EMPTY_LIST_NO_GHOST: &str = "udf.text.empty_list_no_ghost";
/// 1-D text list of only empty strings stored as `[n, 0]` with no data (the reference's
/// `build_string_array` of empty items); read as `n` rows of width 0 (warning).
pub const TEXT_EMPTY_STRINGS_NO_GHOST: &str = "udf.text.empty_strings_no_ghost";
/// A scheme-17 stream that does not decode to exactly the shape (error).
pub const COMPRESS_CORRUPT: &str = "udf.compress.corrupt";
/// `inspect` only: tables over 1 MiB whose content was not checked (info).
pub const CONTENT_NOT_CHECKED: &str = "udf.content.not_checked";
/// Primitive the hint does not allow (error).
pub const HINT_BAD_PRIM: &str = "udf.hint.bad_prim";
/// LINE hint (spec says TODO); only f32/f64 checked (warning).
pub const HINT_LINE: &str = "udf.hint.line_unspecified";
/// TRANSFORM with one ghost axis of 6 or 12 (reference crate) (warning).
pub const HINT_TRANSFORM_FLAT: &str = "udf.hint.transform_flat";
/// Invalid UTF-8 / unpaired UTF-16 surrogate / UTF-32 not a scalar value (error).
pub const TEXT_INVALID: &str = "udf.text.invalid";
/// Not a JSON document (error).
pub const JSON_INVALID: &str = "udf.json.invalid";
/// N-D JSON table not nested arrays of its shape (error).
pub const JSON_SHAPE: &str = "udf.json.shape_mismatch";
/// JSON table larger than `Limits::max_text` (error).
pub const JSON_TOO_LARGE: &str = "udf.json.too_large";
/// INDEX / RANGE without `index_name` (error).
pub const INDEX_NAME_REQUIRED: &str = "udf.index.name_required";
/// `index_name` on another hint (error).
pub const INDEX_NAME_NOT_ALLOWED: &str = "udf.index.name_not_allowed";
/// No such table in the dataset or its parents (error).
pub const INDEX_TARGET_MISSING: &str = "udf.index.target_missing";
/// Index target not DIM_1D (error).
pub const INDEX_TARGET_DIM: &str = "udf.index.target_not_1d";
/// Index value >= target `shape[0]` (error).
pub const INDEX_OUT_OF_RANGE: &str = "udf.index.out_of_range";
/// Range start > end (error).
pub const RANGE_INVERTED: &str = "udf.range.inverted";
/// Range start or end > target `shape[0]` (error).
pub const RANGE_OUT_OF_RANGE: &str = "udf.range.out_of_range";
/// `related_name` table not in the dataset (error).
pub const RELATED_MISSING: &str = "udf.related.missing";
/// Related tables differ in dimension or real axes (error).
pub const RELATED_SHAPE: &str = "udf.related.shape_mismatch";
/// The input could not be read (error).
pub const IO: &str = "udf.io";
/// Overlapping datasets would make reads exceed 4x the file size + 64 MiB (error).
pub const LIMIT_WORK: &str = "udf.limit.work";

/// The corpus sidecar code of a finding code (`None` for infos, unknown codes and warnings
/// other than the compatibility warnings).
pub fn sidecar_code(code: &str) -> Option<&'static str> {
    CODES.iter().find(|c| c.0 == code).and_then(|c| c.2)
}

/// The severity a code is always emitted with.
pub fn severity(code: &str) -> Option<Severity> {
    CODES.iter().find(|c| c.0 == code).map(|c| c.1)
}
