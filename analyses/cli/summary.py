"""``interp summary --out DIR``: one page over the main job's per-model folders (see
``analyses.report.summary``). Writes DIR/summary.md, DIR/comparison.md and DIR/index.html (its
``OUTPUTS``), committed as a set, and re-renders each DIR/<model>/report.html (its ``MODEL_OUTPUTS``,
the page ``interp probe`` writes first without invariances and validation, recorded as the probe's)
with everything the folder holds (its head catalogue where ``interp catalogue`` wrote one, its
validation otherwise), under that folder's own lock. Every folder's lock and ownership
checks are taken before anything is written, so a refusal leaves everything as it was. Nothing else
in the model folders is written."""

from __future__ import annotations

import argparse
from pathlib import Path

from analyses.cli.common import add_force_argument


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="out", help="the main job's output folder (default: out)")
    add_force_argument(p)


def run(args) -> int:
    import contextlib

    from analyses.report.summary import MODEL_OUTPUTS, OUTPUTS, model_dirs, model_pages, summarise
    from interp.io import atomic_write, output_dir

    out = Path(args.out)
    with output_dir(out, OUTPUTS, command="interp summary", what="--out", must_exist=True, force=args.force) as tmp:
        # every model folder's set opened (its lock, the owner of its report.html checked) before anything
        # is written: a refusal leaves the summary and every page as they were
        owns = dict(command="interp summary", what="model folder", force=args.force, owner="interp probe")
        with contextlib.ExitStack() as sets:
            staged = {d.name: sets.enter_context(output_dir(d, MODEL_OUTPUTS, **owns)) for d in model_dirs(out)}
            summarise(out, dest=tmp)
            pages = model_pages(out)  # rendered before anything is committed: a failure leaves all as it was
            for name, html in pages.items():
                atomic_write(staged[name] / "report.html", html)
    print(
        f"wrote {out / 'summary.md'}, {out / 'index.html'} and "
        + ", ".join(f"{out / n / 'report.html'}" for n in pages)
    )
    return 0
