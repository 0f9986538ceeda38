"""Hostile corpus files through Python: open, validate and a small slice answer within the CLI's
memory budget (256 MiB peak RSS), measured in a child process (Ctrl-C: test_interrupt.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import hostile_inputs, ids

HOSTILE = hostile_inputs()
BUDGET_KIB = 256 * 1024

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import rasterpack
    path = sys.argv[1]
    outcome = {}
    report = rasterpack.validate(path)
    outcome["exit_code"] = report.exit_code
    try:
        f = rasterpack.open(path)
        for name in f.arrays:
            a = f.array(name)
            if a.ndim:
                a[(slice(0, 1),) * a.ndim]
        outcome["read"] = "ok"
    except rasterpack.Error as e:
        outcome["read"] = type(e).__name__
    # VmHWM: this process's own peak (ru_maxrss would carry the parent's over exec).
    outcome["rss_kib"] = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    print(json.dumps(outcome))
    """
)


def hostile_param(path):
    return pytest.param(path, id=ids([path])[0])


@pytest.mark.skipif(not HOSTILE, reason="RASTERPACK_CORPUS is not set (the shared corpus)")
@pytest.mark.parametrize("path", [hostile_param(p) for p in HOSTILE])
def test_hostile_files_stay_in_budget(path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    outcome = json.loads(out.stdout)
    assert outcome["rss_kib"] <= BUDGET_KIB, outcome
    assert outcome["exit_code"] in (0, 1, 3), outcome
