"""``interp summary --out DIR``: one page over the main job's per-model folders (see
``analyses.report.summary``). Writes DIR/summary.md, DIR/comparison.md and DIR/index.html (its
``OUTPUTS``), committed as a set; then re-renders each DIR/<model>/report.html (its ``MODEL_OUTPUTS``,
shared with ``interp probe``, which writes the page first without invariances and validation) with
everything the folder holds, under that folder's own lock. Nothing else in the model folders is
written."""

from __future__ import annotations

import argparse
from pathlib import Path

from analyses.cli.common import add_force_argument


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="out", help="the main job's output folder (default: out)")
    add_force_argument(p)


def run(args) -> int:
    from analyses.report.summary import MODEL_OUTPUTS, OUTPUTS, model_pages, summarise
    from interp.io import atomic_write, output_dir

    out = Path(args.out)
    with output_dir(out, OUTPUTS, command="interp summary", what="--out", must_exist=True, force=args.force) as tmp:
        summarise(out, dest=tmp)
        pages = model_pages(out)  # rendered before anything is committed: a failure leaves all as it was
    for name, html in pages.items():
        owns = dict(command="interp summary", what="model folder", force=args.force)
        with output_dir(out / name, MODEL_OUTPUTS, **owns) as mtmp:
            atomic_write(mtmp / "report.html", html)
    print(
        f"wrote {out / 'summary.md'}, {out / 'index.html'} and "
        + ", ".join(f"{out / n / 'report.html'}" for n in pages)
    )
    return 0
