"""Shared paths and the CLI runner. The tests compare the package with the `rasterpack` CLI
built from the same tree (RASTERPACK_CLI, else target/{debug,release}/rasterpack)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTDATA = REPO / "testdata"
EXTENSIONS = {".volp", ".gvrs", ".udf", ".fold", ".mind", ".vds", ".npy"}


def cli_path() -> Path:
    env = os.environ.get("RASTERPACK_CLI")
    candidates = [Path(env)] if env else [REPO / "target" / "debug" / "rasterpack", REPO / "target" / "release" / "rasterpack"]
    for c in candidates:
        if c.is_file():
            return c
    pytest.fail(f"no rasterpack CLI at {[str(c) for c in candidates]}: build it with `cargo build -p rasterpack`")


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([str(cli_path()), *args], capture_output=True, text=False, check=check, timeout=600)


def cli_entry(command: str, path: str, *flags: str) -> dict:
    """The CLI's --json file entry for `command` (inspect/validate) on one path."""
    out = run_cli(command, "--json", *flags, path)
    return json.loads(out.stdout)["files"][0]


def corpus_dir() -> Optional[Path]:
    env = os.environ.get("RASTERPACK_CORPUS")
    return Path(env) if env else None


def inputs_under(root: Path, skip: tuple = ()) -> List[Path]:
    """Every file of a known format and every VDS object-store directory under root."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        if any(part in skip for part in d.relative_to(root).parts):
            continue
        for name in list(dirnames):
            if (d / name / "VolumeDataLayout").is_file():
                found.append(d / name)
                dirnames.remove(name)
        for name in filenames:
            if Path(name).suffix in EXTENSIONS:
                found.append(d / name)
    return sorted(found)


def data_inputs() -> List[Path]:
    return inputs_under(TESTDATA)


def corpus_inputs() -> List[Path]:
    root = corpus_dir()
    if root is None:
        return []
    return inputs_under(root, skip=("hostile",))


def hostile_inputs() -> List[Path]:
    root = corpus_dir()
    if root is None:
        return []
    return inputs_under(root / "hostile")


def ids(paths: List[Path]) -> List[str]:
    return [str(p.relative_to(p.parents[1])) for p in paths]
