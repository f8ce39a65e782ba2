"""The fingerprint tests' TPC-H lineitem (tpchgen-cli, scale 0.01), generated once for both modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _tpchgen() -> str:
    exe = Path(sys.executable).with_name("tpchgen-cli")
    found = str(exe) if exe.is_file() else shutil.which("tpchgen-cli")
    assert found is not None, "tpchgen-cli is not installed: it is in uv.lock's dev group (`make setup`)"
    return found


@pytest.fixture(scope="session")
def lineitem_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tpch")
    subprocess.run([_tpchgen(), "parquet", "-s", "0.01", "--tables=lineitem", "-o", str(out)],
                   check=True, capture_output=True, timeout=300)
    return out
