"""``interp catalogue``: one verdict per head and task, where the probe's labels (what a head attends
to) and patching on the tasks the model solves (what it does) are joined.

Reads ``--labels`` (default ``DIR/heads.csv``, what ``interp probe --out DIR`` wrote) before the model
is loaded; writes ``analyses.catalogue.OUTPUTS`` (catalogue.csv, catalogue_tasks.csv, catalogue.md,
catalogue.json) into ``--out`` as one output set. The powered run (``powered/``), retrieval scores
(``retrieval/retrieval.csv``) and sink shares (``sinks/sinks_heads.csv``) are joined on where they are in the
labels' folder, of this model.
``--workers N`` deals the pairs out by batch (the encoder: heads, as ``interp validate``) and merges
them back in order: the same catalogue.csv as one process.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analyses.cli.common import add_force_argument, add_model_arguments, add_seed_argument, add_worker_arguments
from analyses.workers import run_with_workers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--out", required=True, help="output folder (the model's folder of the main job: out/MODEL)")
    parser.add_argument("--labels", default=None, help="the probe's heads.csv of this model (default: OUT/heads.csv)")
    parser.add_argument(
        "--n", type=int, default=32, help="solved contrastive pairs per task patched (a causal LM; 2 n are generated)"
    )
    parser.add_argument("--eap-pairs", type=int, default=8, help="of them, the pairs EAP-IG scores (0: none)")
    parser.add_argument("--ig-steps", type=int, default=5, help="EAP-IG interpolation steps")
    parser.add_argument("--encoder-n", type=int, default=32, help="an encoder: prompts per family of its probes")
    parser.add_argument(
        "--all-position-heads",
        type=int,
        default=4,
        help="the best N heads of each role that acts at earlier positions (previous-token, duplicate-token) "
        "patched at every position on its tasks",
    )
    parser.add_argument("--batch-size", type=int, default=16)
    add_seed_argument(parser)
    add_worker_arguments(parser)
    add_force_argument(parser)


def run(args) -> int:
    from analyses.validation.labels import read_labels

    path = args.labels or str(Path(args.out) / "heads.csv")
    if not Path(path).exists():
        raise ValueError(
            f"no heads table at {path}; run `interp probe --model {args.model} --out {args.out}` "
            "first, or pass --labels FILE"
        )
    for flag, value, low in (("--n", args.n, 2), ("--eap-pairs", args.eap_pairs, 0), ("--ig-steps", args.ig_steps, 1)):
        if value < low:
            raise ValueError(f"{flag} {value}: must be at least {low}")
    import pandas as pd

    read_labels(path)  # checked (columns, values) before the model is loaded
    table = pd.read_csv(path, low_memory=False)
    from analyses import catalogue as C

    run_with_workers(args, "interp catalogue", C.OUTPUTS, _compute, _write, table, path)
    return 0


def _compute(world, args, table, path):
    from analyses import catalogue as C
    from analyses.validation.job import _load

    model = _load(args.model, args.dtype, args.device)
    result = C.run(
        model,
        table,
        n=args.n,
        seed=args.seed,
        eap_pairs=args.eap_pairs,
        ig_steps=args.ig_steps,
        batch_size=args.batch_size,
        folder=Path(path).parent,
        encoder_n=args.encoder_n,
        all_position_heads=args.all_position_heads,
        world=world,
        progress=world.is_main,
    )
    return result if world.is_main else None


def _write(args, tmp: Path, result, t0: float, table=None, path=None) -> None:
    import hashlib
    import time

    from analyses import catalogue as C

    result.info["labels"] = str(path)
    result.info["labels_sha256"] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    C.write(result, tmp, seconds=time.perf_counter() - t0)
