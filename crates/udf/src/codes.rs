//! Every finding code `validate` can emit, its severity, and the corpus sidecar `error_code`
//! it corresponds to (the conformance corpus uses upper-case codes; rasterpack keeps dotted
//! ones). The interop test checks this mapping against every sidecar.
//!
//! Compatibility warnings (what the reference writer makes although the spec forbids it, see
//! ERRATA) keep the sidecar code of the spec rule they break: the corpus lists that code in
//! `spec_findings` and calls the file `implementation_defined`.

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

pub const TRUNCATED: &str = "udf.header.truncated";
pub const BAD_MAGIC: &str = "udf.header.bad_magic";
pub const UNSUPPORTED_REVISION: &str = "udf.header.unsupported_revision";
pub const HEADER_RESERVED: &str = "udf.header.reserved_nonzero";
pub const HEADER_BAD_ID: &str = "udf.header.bad_id";
pub const HEADER_NEXT: &str = "udf.header.next_nonzero";
pub const OFFSET_MISALIGNED: &str = "udf.offset.misaligned";
pub const OFFSET_NULL_WITH_SIZE: &str = "udf.offset.null_with_size";
pub const OFFSET_OUT_OF_BOUNDS: &str = "udf.offset.out_of_bounds";
pub const DATASET_BAD_CHECK: &str = "udf.dataset.bad_check";
pub const DATASET_HEADER_SIZE_ALIGN: &str = "udf.dataset.header_size_align";
pub const DATASET_HEADER_SIZE_SMALL: &str = "udf.dataset.header_size_small";
pub const DATASET_HEADER_OUT_OF_BOUNDS: &str = "udf.dataset.header_out_of_bounds";
pub const DATASET_HEADER_SLACK: &str = "udf.dataset.header_size_slack";
pub const DATASET_STRING_LEN_ALIGN: &str = "udf.dataset.string_len_align";
pub const DATASET_RESERVED: &str = "udf.dataset.reserved_nonzero";
pub const DATASET_CHECKSUM: &str = "udf.dataset.checksum_unverified";
pub const DATASET_BAD_ID: &str = "udf.dataset.bad_id";
pub const DATASET_CYCLE: &str = "udf.dataset.cycle";
pub const DATASET_TOO_DEEP: &str = "udf.dataset.too_deep";
pub const DATASET_TOO_MANY: &str = "udf.dataset.too_many";
pub const LOOKUP_HASH_ZERO: &str = "udf.lookup.hash_zero";
pub const LOOKUP_OUT_OF_BOUNDS: &str = "udf.lookup.out_of_bounds";
pub const LOOKUP_BAD_UTF8: &str = "udf.lookup.bad_utf8";
pub const LOOKUP_DUPLICATE_HASH: &str = "udf.lookup.duplicate_hash";
pub const TABLE_NULL_KEY: &str = "udf.table.null_key_name";
pub const TABLE_NAME_NOT_FOUND: &str = "udf.table.name_not_found";
pub const TABLE_DUPLICATE_NAME: &str = "udf.table.duplicate_name";
pub const TABLE_RESERVED_BITS: &str = "udf.table.reserved_type_bits";
pub const TABLE_RESERVED_PRIM: &str = "udf.table.reserved_prim";
pub const TABLE_RESERVED_HINT: &str = "udf.table.reserved_hint";
pub const TABLE_HINT_32: &str = "udf.table.hint_32";
pub const TABLE_COMPRESSED: &str = "udf.table.compressed";
pub const TABLE_CHECKSUM: &str = "udf.table.checksum_unverified";
pub const TABLE_RESERVED: &str = "udf.table.reserved_nonzero";
pub const TABLE_MEM_RANGE: &str = "udf.table.mem_range";
pub const TABLE_DATA_EXCEEDS_MEM: &str = "udf.table.data_exceeds_mem";
pub const TABLE_OUT_OF_BOUNDS: &str = "udf.table.out_of_bounds";
pub const TABLE_SHAPE_SIZE: &str = "udf.table.shape_size_mismatch";
pub const SHAPE_GHOST_GAP: &str = "udf.shape.ghost_gap";
pub const HINT_GHOST_DIMS: &str = "udf.hint.ghost_dims";
pub const HINT_GHOST_ON_NONE: &str = "udf.hint.ghost_on_none";
pub const TEXT_EMPTY_LIST_NO_GHOST: &str = "udf.text.empty_list_no_ghost";
pub const COMPRESS_CORRUPT: &str = "udf.compress.corrupt";
pub const CONTENT_NOT_CHECKED: &str = "udf.content.not_checked";
pub const HINT_BAD_PRIM: &str = "udf.hint.bad_prim";
pub const HINT_LINE: &str = "udf.hint.line_unspecified";
pub const HINT_TRANSFORM_FLAT: &str = "udf.hint.transform_flat";
pub const TEXT_INVALID: &str = "udf.text.invalid";
pub const JSON_INVALID: &str = "udf.json.invalid";
pub const JSON_SHAPE: &str = "udf.json.shape_mismatch";
pub const JSON_TOO_LARGE: &str = "udf.json.too_large";
pub const INDEX_NAME_REQUIRED: &str = "udf.index.name_required";
pub const INDEX_NAME_NOT_ALLOWED: &str = "udf.index.name_not_allowed";
pub const INDEX_TARGET_MISSING: &str = "udf.index.target_missing";
pub const INDEX_TARGET_DIM: &str = "udf.index.target_not_1d";
pub const INDEX_OUT_OF_RANGE: &str = "udf.index.out_of_range";
pub const RANGE_INVERTED: &str = "udf.range.inverted";
pub const RANGE_OUT_OF_RANGE: &str = "udf.range.out_of_range";
pub const RELATED_MISSING: &str = "udf.related.missing";
pub const RELATED_SHAPE: &str = "udf.related.shape_mismatch";
pub const IO: &str = "udf.io";
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
