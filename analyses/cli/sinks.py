"""``interp sinks --model smollm2 --out DIR``: the attention sink and the previous-token / induction
scores of every head at 64, 512, 2,048 and 4,096 tokens of real text (``analyses.longctx.sinks``).

Writes the files in ``analyses.longctx.sinks.OUTPUTS`` (per-window scores, per-head and per-layer tables, the summary by
length, the persistence of roles across lengths, the sink by query position, sinks.md and sinks.png),
committed as a set when the run ends. Long: eager attention at 4,096 tokens (its own command, not
part of the main job; README has its time)."""

from __future__ import annotations

import argparse

from analyses.cli.common import add_force_argument, add_model_arguments, add_seed_argument, load_model, positive_int


def _ints(text: str) -> list[int]:
    try:
        out = [positive_int(x) for x in text.split(",") if x.strip()]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers such as 64,512, got {text!r}"
        ) from None
    if not out:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers such as 64,512, got {text!r}")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, causal=True)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--lengths", type=_ints, default=None, help="context lengths (default: 64,512,2048,4096)")
    parser.add_argument("--windows", type=_ints, default=None, help="windows per length (default: 8,8,4,3)")
    add_seed_argument(parser)  # it shuffles the passages the windows are built from
    parser.add_argument(
        "--query-block",
        type=positive_int,
        default=None,
        help="compute each layer's pattern this many query rows at a time (memory block x n, not n^2; e.g. 256)",
    )
    add_force_argument(parser)


def run(args) -> int:
    import sys

    from analyses.longctx import sinks as S
    from interp.io import output_dir

    lengths = args.lengths or list(S.LENGTHS)
    windows = args.windows or (list(S.N_WINDOWS) if args.lengths is None else None)
    if windows is None:
        raise ValueError("--lengths given without --windows: give one window count per length (e.g. --windows 8,4)")
    if len(windows) != len(lengths):
        raise ValueError(f"--windows has {len(windows)} counts for {len(lengths)} --lengths; give one per length")
    try:  # the rest of run's checks, before the model is loaded
        S.check_arguments(lengths, windows, query_block=args.query_block)
    except ValueError as e:
        raise ValueError(
            f"--lengths {','.join(map(str, lengths))} --windows {','.join(map(str, windows))}: {e}"
        ) from None
    with output_dir(args.out, S.OUTPUTS, command="interp sinks", what="--out", force=args.force) as tmp:
        model = load_model(args, causal=True)
        result = S.run(model, lengths, windows, seed=args.seed, query_block=args.query_block)
        S.write(result, tmp)
    for r in S.length_summary(result).itertuples():
        sys.stdout.write(
            f"{r.role:15s} {r.length:5d} tokens: mean {r.mean_score:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}], "
            f"{r.n_label} heads [{r.n_label_low:g}, {r.n_label_high:g}]\n"
        )
    sys.stdout.write(f"report: {args.out}/sinks.md\n")
    return 0
