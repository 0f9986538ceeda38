//! test writer
