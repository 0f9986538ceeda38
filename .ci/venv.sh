# Sourced by .ci/run: a Python venv with the packages the Python-side tests need, from the
# package registry only (pinned in .ci/requirements.txt). Made once per clone under target/
# (ignored by git) and reused while requirements.txt is unchanged.
#   RASTERPACK_VENV  the venv's folder (default: target/ci-venv beside the workspace)
# Exports RASTERPACK_PYTHON (the venv's python) for the tests that call Python oracles.
rasterpack_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RASTERPACK_VENV="${RASTERPACK_VENV:-$rasterpack_repo/target/ci-venv}"
rasterpack_req="$rasterpack_repo/.ci/requirements.txt"
rasterpack_stamp="$RASTERPACK_VENV/.requirements.sha256"
rasterpack_want="$(sha256sum "$rasterpack_req" | cut -d' ' -f1)"
if [ ! -x "$RASTERPACK_VENV/bin/python" ] || [ "$(cat "$rasterpack_stamp" 2>/dev/null)" != "$rasterpack_want" ]; then
  echo "making the test venv in $RASTERPACK_VENV"
  python3 -m venv --clear "$RASTERPACK_VENV"
  "$RASTERPACK_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$RASTERPACK_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$rasterpack_req"
  echo "$rasterpack_want" > "$rasterpack_stamp"
fi
RASTERPACK_PYTHON="$RASTERPACK_VENV/bin/python"
export RASTERPACK_VENV RASTERPACK_PYTHON
