"""The shell scripts' own checks (what they refuse before any interp command runs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_powered_sh_refuses_an_out_that_is_a_file(tmp_path):
    """`OUT=<a file> bash scripts/powered.sh`: one line naming OUT and what it should be, exit status
    2, before interp runs (not "[Errno 20] Not a directory" on $OUT/smollm2/heads.csv); the file stays."""
    out = tmp_path / "notes.txt"
    out.write_text("mine")
    env = dict(os.environ, OUT=str(out))
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "powered.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc
    assert proc.stderr.strip() == (
        f"scripts/powered.sh: OUT={out} is a file, not a folder; set OUT to the main job's output folder (default: out)"
    )
    assert proc.stdout == "" and out.read_text() == "mine"
