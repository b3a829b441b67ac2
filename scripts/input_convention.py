"""The size of the input convention (issue 35, labels v4): SmolLM2's accuracy and mean logit
difference on the contrastive pairs (subject-verb, IOI) with ``<|endoftext|>`` first (the one
convention, ``analyses.heads.model_input``) and without it (the pairs before labels v4).

    PYTHONPATH=. python scripts/input_convention.py [--n 480] [--seed 0] [--tasks subject_verb,ioi]

Prints one row per task and input: n, accuracy (logit difference > 0), the mean logit difference
and its 95% bootstrap interval; and the paired change per prompt (with - without)."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch


def main() -> None:
    import models
    from analyses.validation.prompts import contrastive_pairs, pair_logit_diff
    from interp.stats import bootstrap_ci

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--n", type=int, default=480)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", default="subject_verb,ioi")
    args = ap.parse_args()
    torch.set_num_threads(2)
    model = models.load(args.model).eval()
    for task in args.tasks.split(","):
        pairs = contrastive_pairs(task, model.tokenizer, args.n, seed=args.seed, held_out=0.0)
        assert pairs.input.startswith("prepend "), pairs.input
        bare = dataclasses.replace(  # the same prompts without the prepended token (right padding: column 0)
            pairs,
            clean=pairs.clean[:, 1:],
            corrupted=pairs.corrupted[:, 1:],
            attention_mask=pairs.attention_mask[:, 1:],
            position=pairs.position - 1,
            input="as tokenised (no sink token)",
        )
        with_sink, without = (pair_logit_diff(model, p).numpy() for p in (pairs, bare))
        for name, d in ((pairs.input, with_sink), (bare.input, without)):
            lo, hi = bootstrap_ci(d, n_boot=2000, seed=0)
            print(
                f"{task:13s} {name:30s} n={d.size} accuracy={np.mean(d > 0):.3f} "
                f"mean_logit_diff={d.mean():.3f} [{lo:.3f}, {hi:.3f}]"
            )
        change = with_sink - without
        lo, hi = bootstrap_ci(change, n_boot=2000, seed=0)
        both = np.mean((with_sink > 0) == (without > 0))
        print(
            f"{task:13s} paired change (with - without): {change.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]; "
            f"same right/wrong call on {both:.3f} of prompts"
        )


if __name__ == "__main__":
    main()
