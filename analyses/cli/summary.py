"""``interp summary --out DIR``: one page over the main job's per-model folders (see
``analyses.report.summary``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="out", help="the main job's output folder (default: out)")


def run(args) -> int:
    from analyses.report.summary import summarise

    path = summarise(Path(args.out))
    print(f"wrote {path}")
    return 0
