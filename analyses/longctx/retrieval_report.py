"""The retrieval-heads analysis' report: the figure (``figure``), the report section
(``report_markdown``), the output set (``OUTPUTS``, ``write``, through ``interp.io.write_set``) and
the reader of its per-head table (``read_retrieval``, which the head report, the page and
``interp retrieval --ranking`` use)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analyses.longctx.retrieval_measure import RetrievalResult

__all__ = ["NEEDLE_TEXT", "OUTPUTS", "PREFIX_TEXT", "figure", "read_retrieval", "report_markdown", "write"]

OUTPUTS = (
    "retrieval.csv",
    "accuracy.csv",
    "masking.csv",
    "trials.csv",
    "mask_trials.csv",
    "retrieval.md",
    "retrieval.png",
    "retrieval.json",
)


def figure(result: RetrievalResult) -> bytes:
    """Three panels: accuracy by length and depth, the retrieval score per head, the masking drops."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from interp.display import png_bytes

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [1, 1.3, 1]})
    acc = result.accuracy[result.accuracy["depth"].notna()]
    grid = acc.pivot(index="length", columns="depth", values="exact")
    ax = axes[0]
    im = ax.imshow(grid.to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(grid.columns)), [f"{d:g}" for d in grid.columns])
    ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
    for (i, j), v in np.ndenumerate(grid.to_numpy()):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="w" if v < 0.6 else "k", fontsize=8)
    ax.set_xlabel("needle depth")
    ax.set_ylabel("haystack tokens")
    ax.set_title("exact-match retrieval accuracy")
    fig.colorbar(im, ax=ax, fraction=0.046)
    h = result.heads
    s = np.full((int(h["layer"].max()) + 1, int(h["head"].max()) + 1), np.nan)
    s[h["layer"].to_numpy(), h["head"].to_numpy()] = h["retrieval"].to_numpy()
    ax = axes[1]
    im = ax.imshow(s.T, vmin=0, vmax=max(1e-9, float(np.nanmax(s))) if np.isfinite(s).any() else 1, cmap="magma")
    ax.set_xlabel("layer")
    ax.set_ylabel("head")
    lengths = ", ".join(map(str, result.info.get("solved_lengths", []))) or "none"
    ax.set_title(f"retrieval score (lengths {lengths})")
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax = axes[2]
    m = result.masking
    if len(m):
        shown = m[m["condition"].isin(["top", "random (mean)"])]
        labels = [f"{r.length}\n{r.condition}" for r in shown.itertuples()]
        drop = shown["exact_drop"].to_numpy()
        err = np.stack([drop - shown["exact_drop_low"].to_numpy(), shown["exact_drop_high"].to_numpy() - drop])
        colors = ["tab:red" if c == "top" else "tab:grey" for c in shown["condition"]]
        ax.bar(range(len(drop)), drop, yerr=err, color=colors, capsize=4)
        ax.set_xticks(range(len(drop)), labels, fontsize=8)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_ylabel("drop in exact-match accuracy (95% CI)")
        ax.set_title(f"masking k={int(shown['k'].max())} heads ({result.info['scope']})")
    else:
        ax.text(0.5, 0.5, "no masking run\n(no solved length to mask at)", ha="center", va="center")
        ax.set_axis_off()
    fig.tight_layout()
    return png_bytes(fig)


NEEDLE_TEXT = '"The secret code is NNNNNNN."'
PREFIX_TEXT = '"The secret code is "'


def report_markdown(result: RetrievalResult) -> str:
    """The report section: the task, the accuracy table, the top heads, the masking table, the times."""
    from interp.display import fmt, md_table

    info, h = result.info, result.heads
    acc = result.accuracy.copy()
    acc["depth"] = acc["depth"].map(lambda d: "all" if pd.isna(d) else f"{d:g}")
    top = h.sort_values("rank").head(max(info["k"], 10))
    top_cols = ["rank", "layer", "head", "retrieval", "hits", "copy_steps"] + [
        c for c in h.columns if c.startswith("retrieval_")
    ]
    solved = ", ".join(map(str, info["solved_lengths"])) or "none"
    lengths, counts = ", ".join(map(str, info["lengths"])), "/".join(map(str, info["n_haystacks"]))
    lines = [
        f"## Retrieval heads: {info['model']}",
        "",
        f"Needle-in-a-haystack on BoolQ passages: a needle {NEEDLE_TEXT} (7 distinct digits, one token each) at "
        f"depths {', '.join(f'{d:g}' for d in info['depths'])} of haystacks of {lengths} tokens ({counts} haystacks "
        f"per length, each at every depth), in the model's chat template, the answer opened with {PREFIX_TEXT}; "
        "greedy decoding with the KV cache, the prompt prefilled on the fused path, pattern hooks on the decode "
        "steps only.",
        "",
        "![retrieval: accuracy, scores, masking](retrieval.png)",
        "",
        "### Retrieval accuracy (exact match of the code; Wilson 95% interval; token share: code tokens "
        "generated at their place)",
        "",
        md_table(acc, ["length", "depth", "n", "exact", "exact_low", "exact_high", "token_share"]),
        f"Lengths with exact-match accuracy >= {info['threshold']:g}: **{solved}**. The scores below pool the "
        "decode steps of those lengths.",
        "",
        "### Retrieval score (Wu et al. 2024), top heads",
        "",
        "Over decode steps whose generated token is a code token, the share on which the head's largest "
        f"attention lands on that code token in the needle. {int(h['copy_steps'].iloc[0]) if len(h) else 0} copying "
        f"steps. Heads with score > 0.1: {int((h['retrieval'] > 0.1).sum())} of {len(h)}.",
        "",
        md_table(top, top_cols),
    ]
    m = result.masking
    if len(m):
        lines += [
            f"### Masking the top-{info['k']} retrieval heads vs {info['k']} random heads of the same layers",
            "",
            f"{info['masking']}, scope **{info['scope']}** ("
            + (
                "decode steps only: one prefill, the KV cache branched per condition"
                if info["scope"] == "decode"
                else "the prefill and the decode steps"
            )
            + f"); {info['mask_n']} haystacks per length not used for scoring, haystack i at depth i mod 5; "
            f"{info['draws']} random draws. Drops are paired (same haystacks), 95% bootstrap intervals over "
            "haystacks.",
            "",
            f"Top heads (ranking: {info.get('ranking', 'this run')}): "
            + ", ".join(f"L{a}H{b}" for a, b in info["top_heads"])
            + ". Random draws: "
            + "; ".join(", ".join(f"L{a}H{b}" for a, b in r) for r in info["random_heads"])
            + ".",
            "",
            md_table(
                m,
                [
                    "length",
                    "condition",
                    "draw",
                    "k",
                    "n",
                    "exact",
                    "exact_drop",
                    "exact_drop_low",
                    "exact_drop_high",
                    "token_share",
                    "token_share_drop",
                    "token_share_drop_low",
                    "token_share_drop_high",
                ],
            ),
        ]
    else:
        lines += ["No masking run: no length in " + ", ".join(map(str, info["mask_lengths"])) + " is solved.", ""]
    times = [f"accuracy and scores {fmt(info['accuracy_cpu_s'])} s CPU ({fmt(info['accuracy_wall_s'])} s wall)"]
    if "masking_cpu_s" in info:
        times.append(f"masking {fmt(info['masking_cpu_s'])} s CPU ({fmt(info['masking_wall_s'])} s wall)")
    lines += ["", "Time: " + "; ".join(times) + f"; torch threads: {info.get('threads', '?')}.", ""]
    return "\n".join(lines)


# the contract's keys of ``info``, which repeat the record's settings: retrieval.json leaves them out
_CONTRACT_ONLY = ("analysis", "params")


def write(result: RetrievalResult, folder, force: bool = False) -> Path:
    """Write ``OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``; inside a set
    already open there, into its staging folder): the per-head scores (retrieval.csv, read back by
    ``read_retrieval``), the accuracy table, the masking table, the per-trial rows of both runs, the
    report section, the figure and the run's record (retrieval.json). Returns ``folder``."""
    from interp.io import write_set

    return write_set(folder, OUTPUTS, lambda tmp: _write_files(result, tmp), command="interp retrieval", force=force)


def _write_files(result: RetrievalResult, folder: Path) -> None:
    """``OUTPUTS`` written into ``folder`` (``write`` gives it a staging folder)."""
    import json

    paths = {name: folder / name for name in OUTPUTS}
    record = {k: v for k, v in result.info.items() if k not in _CONTRACT_ONLY}
    texts = {
        "retrieval.csv": result.heads.to_csv(index=False),
        "accuracy.csv": result.accuracy.to_csv(index=False),
        "masking.csv": result.masking.to_csv(index=False),
        "trials.csv": result.trials.to_csv(index=False),
        "mask_trials.csv": result.mask_trials.to_csv(index=False),
        "retrieval.md": report_markdown(result),
    }
    for name, text in texts.items():
        paths[name].write_text(text, encoding="utf-8")
    paths["retrieval.png"].write_bytes(figure(result))
    paths["retrieval.json"].write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")


def read_retrieval(path: str | Path) -> pd.DataFrame:
    """The per-head scores ``write`` puts in ``retrieval.csv``: columns layer, head, retrieval (a
    share in [0, 1], empty where no decode step copied: a written ``nan`` or ``inf`` is refused), read
    strictly (``interp.io.read_csv_rows``); layer and head whole numbers >= 0, each head once.
    ``retrieval_measure.check_ranking`` checks it against a model's shape."""
    from interp.io import read_csv_rows

    header, rows = read_csv_rows(path)
    missing = [c for c in ("layer", "head", "retrieval") if c not in header]
    if missing:
        raise ValueError(f"{path} lacks the columns {missing}; give the retrieval.csv that `interp retrieval` writes")
    col = {c: header.index(c) for c in ("layer", "head", "retrieval")}
    out, seen = [], {}
    for line, cells in rows:
        try:
            layer, head = int(cells[col["layer"]]), int(cells[col["head"]])
            score = float(cells[col["retrieval"]]) if cells[col["retrieval"]].strip() else float("nan")
        except ValueError:
            raise ValueError(
                f"{path}, line {line}: layer and head must be whole numbers and retrieval a number"
            ) from None
        if not (0.0 <= score <= 1.0 or (np.isnan(score) and not cells[col["retrieval"]].strip())):
            raise ValueError(
                f"{path}, line {line}: retrieval={cells[col['retrieval']].strip()} is not a share in [0, 1] "
                "(leave the cell empty for a head no decode step scored)"
            )
        if layer < 0 or head < 0:
            raise ValueError(f"{path}, line {line}: layer {layer}, head {head}: layer and head count from 0")
        if (layer, head) in seen:
            raise ValueError(
                f"{path}, line {line}: layer {layer}, head {head} is listed twice (first on line {seen[layer, head]})"
            )
        seen[layer, head] = line
        out.append({"layer": layer, "head": head, "retrieval": score})
    return pd.DataFrame(out, columns=["layer", "head", "retrieval"])
