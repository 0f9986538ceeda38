//! The CLI's library half: the format registry, opening and detecting inputs, the reports of
//! `inspect`/`validate` (their `--json` file entries) and `convert`. The `rasterpack` binary and
//! the Python package (`python/`) both call these, so the two fronts share one implementation.

pub mod args;
pub mod convert;
pub mod detect;
pub mod progress;
pub mod registry;
pub mod report;
pub mod signals;
pub mod subset;
