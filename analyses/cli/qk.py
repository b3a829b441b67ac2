"""``interp qk --model smollm2 --task subject_verb --heads L26H0,L27H8 --out DIR``: why the heads attend
where they do. Each head's score of the answer position on the task's target word (the subject, the
indirect object, the antecedent), and its difference against a rival key, split into (query-side
component) x (key-side component) terms over the solved prompts (``analyses.qk``; docs/qk.md).

Writes the files in ``analyses.qk.OUTPUTS`` as one set: qk_heads.csv, qk_components.csv,
qk_cells.csv, qk_check.csv, qk_prompts.csv, qk.png, qk.md and qk.json. The task and the head names
are checked before the model loads; a model whose scores do not split (post-norm: MiniLM; soft-capped
scores: Gemma 2) is refused in one line."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from analyses.cli.common import add_force_argument, add_model_arguments, add_seed_argument, load_model

TASKS = ("subject_verb", "ioi", "pronoun_gender")  # analyses.qk.QK_TASKS (no torch here)
_HEAD = re.compile(r"L(\d+)H(\d+)|a(\d+)\.h(\d+)|(\d+)\.(\d+)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, causal=True)
    parser.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    parser.add_argument(
        "--heads", required=True, help="comma-separated heads: L<layer>H<head> (L26H0), a<layer>.h<head> or <l>.<h>"
    )
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--n", type=int, default=96, help="pairs generated (default 96; the solved ones are read)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--top", type=int, default=8, help="components and cells with intervals per head (8)")
    parser.add_argument("--no-check", action="store_true", help="skip the frozen-scale check (one batched rerun)")
    add_seed_argument(parser)
    add_force_argument(parser)


def _check(args: argparse.Namespace) -> None:
    if args.task not in TASKS:
        raise ValueError(f"--task {args.task!r}: QK attribution reads {', '.join(TASKS)} (a target word in the prompt)")
    bad = [h for h in args.heads.split(",") if not _HEAD.fullmatch(h.strip())]
    if bad or not args.heads.strip():
        raise ValueError(f"--heads {args.heads!r}: write heads as L<layer>H<head> (e.g. L26H0,L27H8)")
    for name, least in (("n", 2), ("batch_size", 1), ("top", 1)):
        if getattr(args, name) < least:
            raise ValueError(f"--{name.replace('_', '-')} must be at least {least}, got {getattr(args, name)}")


def run(args: argparse.Namespace) -> int:
    from interp.io import output_dir

    _check(args)  # before the model is loaded
    import analyses.qk as qk

    with output_dir(args.out, qk.OUTPUTS, command="interp qk", what="--out", force=args.force) as tmp:
        model = load_model(args)
        why = qk.refusal(model)
        if why:
            raise ValueError(f"--model {args.model}: {why}")
        if not model.cfg.lm_head:
            raise ValueError(f"--model {args.model}: interp qk reads the prompts a causal LM solves; it has no LM head")
        heads = qk.parse_heads(args.heads, model)
        result = qk.run(model, args.task, heads, n=args.n, seed=args.seed, batch_size=args.batch_size, top=args.top,
                        check=not args.no_check, progress=True)  # fmt: skip
        qk.write(result, tmp)
    said = "; ".join(
        f"L{r.layer}H{r.head} target wins {r.target_wins:.2f}, query side {r.top_query}; key side {r.top_key}"
        for r in result.heads.itertuples()
    )
    sys.stdout.write(f"interp qk: {args.task} on {result.model_name}: {said}; report: {Path(args.out) / 'qk.md'}\n")
    return 0
