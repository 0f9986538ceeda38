# Sourced by .ci/run and `just test`: point RASTERPACK_CORPUS at the shared corpus, or stop
# with a message saying what is missing. An empty or wrong path would make the interop tests
# fail one crate at a time (and hide the tests of the crates after the first failure).
#   RASTERPACK_CORPUS set:   must name an existing folder (made absolute: cargo runs each
#                            test in its crate's folder);
#   unset:                   ../shared/corpus beside the clone must exist.
# To run every other test without the corpus: `cargo test --workspace` (interop tests skip).
rasterpack_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${RASTERPACK_CORPUS+set}" ]; then
  if [ -z "$RASTERPACK_CORPUS" ]; then
    echo "error: RASTERPACK_CORPUS is set but empty; set it to the corpus folder or unset it" >&2
    exit 2
  fi
  if [ ! -d "$RASTERPACK_CORPUS" ]; then
    echo "error: RASTERPACK_CORPUS=$RASTERPACK_CORPUS is not a folder" >&2
    exit 2
  fi
  RASTERPACK_CORPUS="$(cd "$RASTERPACK_CORPUS" && pwd)"
else
  if [ ! -d "$rasterpack_repo/../shared/corpus" ]; then
    echo "error: the interop corpus is missing: expected $(dirname "$rasterpack_repo")/shared/corpus" >&2
    echo "       (set RASTERPACK_CORPUS=/absolute/path/to/corpus, or run 'cargo test --workspace'" >&2
    echo "       to run every test but the interop ones, which then say 'skipped')" >&2
    exit 2
  fi
  RASTERPACK_CORPUS="$(cd "$rasterpack_repo/../shared/corpus" && pwd)"
fi
export RASTERPACK_CORPUS
echo "interop corpus: $RASTERPACK_CORPUS"
