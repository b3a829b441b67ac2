"""``interp summary --out DIR``: one page over the main job's per-model folders (see
``analyses.report.summary``). Writes DIR/summary.md and DIR/comparison.md (``OWNS``), committed as a
set; the per-model folders are read, never written."""

from __future__ import annotations

import argparse
from pathlib import Path

OWNS = ("summary.md", "comparison.md")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="out", help="the main job's output folder (default: out)")


def run(args) -> int:
    from interp.io import output_dir

    out = Path(args.out)
    with output_dir(out, OWNS, command="interp summary", what="--out", must_exist=True) as tmp:
        from analyses.report.summary import summarise

        summarise(out, dest=tmp)
    print(f"wrote {out / 'summary.md'}")
    return 0
