"""``interp positional --budget full --out docs/positional_study``: the positional-encoding study
(``analyses.positional``): synthetic tasks (order, length extrapolation, induction heads) over every
scheme and seed, and models per scheme on natural text. ``python -m analyses.positional`` is the same
command (its ``__main__`` calls this one).

Writes ``analyses.positional.OUTPUTS`` (the claims table, one table and figure per claim, runs.csv,
the natural-text tables) into ``--out``, committed as a set when the study ends. Resumable: each
finished run leaves its result in ``--work`` and is skipped next time; a run whose result is stored
for the same budget signature is read back, not retrained, so the same command regenerates the
tables from stored results (docs/positional.md). ``--doc FILE`` then fills the ``<!-- begin X.md
-->`` blocks of FILE with the new tables. The study trains its own models: no ``--model``; each run
uses one torch thread (``--jobs`` runs at once)."""

from __future__ import annotations

import argparse

from analyses.cli.common import add_force_argument, comma_list


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget",
        default="quick",
        help="a budget of analyses.positional.STUDY_BUDGETS by name (default quick: seconds, for tests and "
        "notebook 05; full: the documented study)",
    )
    parser.add_argument(
        "--out", default="reports/positional", help="folder for the tables and figures (docs: docs/positional_study)"
    )
    parser.add_argument("--work", default=None, help="run results and resumable state (default out/positional-BUDGET)")
    parser.add_argument("--checkpoints", default=None, help="where the natural-text models are saved (a few MB each)")
    parser.add_argument(
        "--kinds", type=comma_list, default=None, help="run kinds, comma-separated (default: every kind of the budget)"
    )
    parser.add_argument(
        "--schemes", type=comma_list, default=None, help="positional schemes, comma-separated (default: all)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, one process and one torch thread each")
    parser.add_argument(
        "--doc", default=None, help="a markdown file whose <!-- begin X.md --> blocks get the new tables"
    )
    add_force_argument(parser)


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from analyses import positional as P
    from interp.io import output_dir, readable_input

    budget = P.study_budget(args.budget)
    select = {k: v for k, v in (("kinds", args.kinds), ("schemes", args.schemes)) if v is not None}
    P.plan(budget, **select)  # a wrong kind or scheme fails now, before --out is touched
    if args.jobs < 1:
        raise ValueError(f"--jobs must be a positive number of processes, got {args.jobs}")
    if args.doc:
        readable_input(args.doc, "--doc file", "a markdown file with <!-- begin X.md --> blocks")
    start = time.perf_counter()
    with output_dir(args.out, P.OUTPUTS, command="interp positional", what="--out", force=args.force) as tmp:
        result = P.run(budget, args.work, args.checkpoints, jobs=args.jobs, **select)
        P.write(result, tmp)
    results = result.results
    cpu = sum(r.get("wall_seconds", 0.0) for r in results)
    print(f"{len(results)} runs; {cpu / 60:.1f} CPU-minutes in the runs; this call {time.perf_counter() - start:.0f} s")
    print((Path(args.out) / "claims.md").read_text())
    if args.doc:
        print(f"{args.doc}: filled {', '.join(P.fill_doc(args.doc, args.out)) or 'nothing'}")
    print(f"report: {Path(args.out).resolve()}")
    return 0
