"""``interp retrieval``: retrieval heads at long context (Wu et al. 2024) on a needle-in-a-haystack
task over real text (``analyses.longctx.retrieval``; docs/long_context.md).

Measures the model's own retrieval accuracy by haystack length and needle depth, scores every head
(the share of copied needle tokens on which its largest attention lands on that token), and masks
the top-k heads against k random heads of the same layers at the lengths the model solves. Writes
``DIR/retrieval.csv`` (one row per head: ``layer, head, retrieval``), ``accuracy.csv``,
``masking.csv``, ``trials.csv``, ``mask_trials.csv``, ``retrieval.md``, ``retrieval.png`` and
``retrieval.json``, committed as a set when the run ends. With ``--out out/<model>/retrieval``,
``interp summary`` puts the scores on the model's page (``analyses.report.page.page_from_folder``).
Long: see the README for its measured time.
"""

from __future__ import annotations

import argparse

from analyses.cli.common import add_force_argument, add_model_arguments, add_seed_argument, load_model, positive_int


def _mask_lengths(text: str) -> list[int]:
    return [] if text.strip().lower() == "none" else _lengths(text)


def _lengths(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of lengths, e.g. 512,1024") from None
    if not out or any(x < 16 for x in out):
        raise argparse.ArgumentTypeError(f"{text!r}: give lengths of at least 16 tokens, e.g. 512,1024") from None
    return out


def _counts(text: str) -> list[int]:
    return [positive_int(x) for x in text.split(",") if x.strip()] or [positive_int(text)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, causal=True)  # a causal LM with a chat template
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--lengths",
        type=_lengths,
        default=[512, 1024, 2048, 4096],
        help="haystack lengths in tokens (default: 512,1024,2048,4096)",
    )
    parser.add_argument(
        "--n",
        type=_counts,
        default=None,
        help="haystacks per length, each at 5 depths: one count, or one per length "
        "(default: 4 up to 1,024 tokens, 3 up to 2,048, 2 beyond; 4,4,3,2 for the default lengths)",
    )
    parser.add_argument(
        "--mask-lengths",
        type=_mask_lengths,
        default=[2048],
        help="lengths for the masking check (<= 2048 keeps it affordable on CPU), or 'none' (default 2048)",
    )
    parser.add_argument("--mask-n", type=positive_int, default=20, help="haystacks per masking length (default 20)")
    parser.add_argument("--k", type=positive_int, default=10, help="heads masked (default 10)")
    parser.add_argument("--draws", type=positive_int, default=3, help="draws of k random same-layer heads (default 3)")
    parser.add_argument(
        "--scope",
        choices=["decode", "all"],
        default="decode",
        help="mask on the decode steps only (one prefill per haystack; default) or in the prefill too",
    )
    parser.add_argument(
        "--ranking",
        default=None,
        help="mask the top-k heads of this retrieval.csv (an earlier run's) instead of this run's scores",
    )
    add_seed_argument(parser)
    add_force_argument(parser)


def run(args) -> int:
    from interp.io import output_dir

    ranking = None
    if args.ranking:  # read and checked before the model is loaded (its shape: before the first haystack)
        from analyses.longctx.retrieval import check_ranking, read_retrieval

        try:
            ranking = read_retrieval(args.ranking)
        except ValueError as e:  # its message starts with the file's name
            raise ValueError(f"--ranking {e}") from None
        try:
            check_ranking(ranking, args.k)
        except ValueError as e:
            raise ValueError(f"--ranking {args.ranking}: {e}") from None
    from analyses.longctx import retrieval

    with output_dir(args.out, retrieval.OUTPUTS, command="interp retrieval", what="--out", force=args.force) as tmp:
        model = load_model(args, causal=True)
        result = retrieval.run(
            model,
            lengths=args.lengths,
            n=None if args.n is None else args.n[0] if len(args.n) == 1 else args.n,
            mask_lengths=args.mask_lengths,
            mask_n=args.mask_n,
            k=args.k,
            draws=args.draws,
            scope=args.scope,
            seed=args.seed,
            ranking=ranking,
        )
        retrieval.write(result, tmp)
    return 0
