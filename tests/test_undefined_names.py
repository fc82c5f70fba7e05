"""Every name the package's code reads is defined: a GPU-only branch never runs in CI, and a name left undefined there
(a constant moved to another module) crashed every evaluation of an H100 call on 2026-12-06. The project's ruff
settings ignored F821 everywhere for the benches' lambdas until 2026-12-08 and now only in bench/; this runs that one
rule over the package whatever the settings say, where exceptions are marked."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ["judge", "search", "sandbox", "store", "families", "generators", "agent", "kernelsearch"]


def test_no_undefined_names_in_the_package():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (the dev extra)")
    p = subprocess.run([ruff, "check", "--no-cache", "--select", "F821", "--output-format", "concise",
                        *[str(ROOT / d) for d in PACKAGE]], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-1000:]
