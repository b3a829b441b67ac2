"""Cost of the powered validation (``interp validate --powered``) per ablated prompt run, relative to
one plain forward pass over the same prompts.

    python bench/bench_powered.py [--labels heads.csv|patterns] [--n 100] [--n-null 30]

Per metric of the labelled roles: the prompts' plain forward pass (median of --repeat), the
powered run of that metric's roles, the number of ablated prompt runs it made (``powered.json``'s
``ablated_prompt_runs``), seconds per run, and the ratio (run time / (runs x plain forward time per
prompt)). Multiply the runs of a labels table by the seconds per run to plan a run's time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    import pandas as pd
    import torch

    import models
    from analyses import validation as V
    from analyses.validation.powered import POWERED_METRICS
    from interp.display import md_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default="patterns")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    model = models.load("smollm2").eval()
    labels = V.pattern_labels(model) if args.labels == "patterns" else V.read_labels(args.labels)
    labels = labels[labels["label"].astype(bool)]
    rows = []
    for metric in sorted({POWERED_METRICS.get(r, "loss") for r in labels["role"]}):
        roles = [r for r in set(labels["role"]) if POWERED_METRICS.get(r, "loss") == metric]
        prompts, _ = V.powered_prompts(model, [metric], n=args.n, seed=0)
        ps = prompts[metric]
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            with torch.no_grad():
                model(ps.tokens, attention_mask=ps.attention_mask)
            times.append(time.perf_counter() - t)
        plain = statistics.median(times) / ps.tokens.shape[0]
        t = time.perf_counter()
        res = V.run_powered(
            model, labels[labels["role"].isin(roles)], prompts=prompts, n_null=args.n_null, n_group_null=args.n_null
        )
        took = time.perf_counter() - t
        runs = res.info["ablated_prompt_runs"]
        rows.append(
            dict(
                metric=metric,
                prompts=ps.tokens.shape[0],
                width=ps.tokens.shape[1],
                plain_s_per_prompt=plain,
                runs=runs,
                seconds=took,
                s_per_run=took / runs,
                ratio=took / (runs * plain),
            )
        )
        print(pd.DataFrame(rows).tail(1).to_string(index=False), flush=True)
    print(md_table(pd.DataFrame(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
