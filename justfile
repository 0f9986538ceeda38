# Recipes for rasterpack. Plain cargo commands work without `just`; these are shortcuts.

corpus := justfile_directory() + "/../shared/corpus"

# Build and run every test, the interop tests included: needs the corpus (../shared/corpus beside
# the clone, or RASTERPACK_CORPUS) and stops with a clear message without it. Without the
# corpus, `cargo test --workspace` runs everything else (the interop tests say "skipped").
test:
    #!/usr/bin/env bash
    set -euo pipefail
    source .ci/corpus.sh
    cargo test --workspace

# Every benchmark (each generates its own data; GVRS also reads the corpus's big file).
bench:
    RASTERPACK_CORPUS={{corpus}} cargo bench --workspace

# One format's benchmarks, e.g. `just bench-one volp`.
bench-one fmt:
    RASTERPACK_CORPUS={{corpus}} cargo bench -p rasterpack-{{fmt}}

# Fuzz one target for `secs` seconds (needs `cargo install cargo-fuzz`), e.g. `just fuzz volp_parse`.
fuzz target secs="60":
    cd fuzz && cargo fuzz run -s none {{target}} -- -max_total_time={{secs}}

# Fuzz with AddressSanitizer on the stable toolchain.
fuzz-asan target secs="60":
    cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run {{target}} -- -max_total_time={{secs}} -malloc_limit_mb=2048

# List the fuzz targets.
fuzz-list:
    cd fuzz && cargo fuzz list

# Formatting and lints as the before-stop hook checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# The library docs, as CI checks them (no warnings); `just doc --open` to browse them.
doc *args:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps {{args}}

# The CI script exactly as CI runs it.
ci:
    bash .ci/run
