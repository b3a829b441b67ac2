"""The main job's summary (``interp summary --out DIR``): one page over the main job's per-model folders.

Reads ``DIR/<model>/heads.csv`` (head roles), ``DIR/<model>/invariance/invariance.csv`` and
``DIR/<model>/validation/validation.csv`` for every model folder present, and writes
``DIR/comparison.md`` (which roles live in which layers of each model) and ``DIR/summary.md``
(links to the full reports, the invariance section, the validation verdicts). Atomic writes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analyses.heads.report import write_comparison
from analyses.invariance.report import invariance_section
from interp.io import atomic_write, md_table


def _validation_section(frames: dict[str, pd.DataFrame]) -> str:
    lines = [
        "## Causal validation of the labels",
        "",
        "Each labelled head is ablated (mean ablation) and the behaviour metric tied to its role is compared "
        "with ablating random heads (see each model's `validation/validation.md` for the decision rule).",
        "",
    ]
    for name, df in frames.items():
        counts = df.groupby(["role", "verdict"]).size().unstack(fill_value=0).reset_index()
        lines += [f"### {name}", "", md_table(counts), ""]
        ok = df[df.verdict == "validated"]
        if len(ok):
            heads = ", ".join(
                f"L{int(r.layer)}H{int(r.head)} {r.role} ({r.metric}: {r.effect:.3g}, p={r.p_value:.3g})"
                for r in ok.itertuples()
            )
            lines += [f"Validated: {heads}.", ""]
    return "\n".join(lines)


def summarise(out: Path) -> Path:
    out = Path(out)
    dirs = sorted(p for p in out.iterdir() if (p / "heads.csv").exists()) if out.is_dir() else []
    if not dirs:
        raise SystemExit(
            f"interp summary: no <model>/heads.csv under {out}; run `interp probe --out {out}/<model>` first"
        )
    heads = {d.name: pd.read_csv(d / "heads.csv") for d in dirs}
    for name, df in heads.items():  # attrs do not survive the CSV: a bidirectional model has rows
        df.attrs["model"] = name  # scored in the subject->verb direction, a causal one never
        df.attrs["causal"] = not (df["direction"] == "subject->verb").any()
    comparison = write_comparison(heads, out)
    lines = ["# Head-probing summary", ""]
    for d in dirs:
        lines.append(
            f"- **{d.name}**: [report]({d.name}/report.md) ([html]({d.name}/report.html)), "
            f"{int(heads[d.name]['label'].sum())} labels over "
            f"{heads[d.name][['layer', 'head']].drop_duplicates().shape[0]} heads"
        )
    lines += ["", comparison.read_text().replace("# ", "## ", 1), ""]
    inv = [
        pd.read_csv(d / "invariance" / "invariance.csv") for d in dirs if (d / "invariance" / "invariance.csv").exists()
    ]
    if inv:
        lines += [invariance_section(pd.concat(inv, ignore_index=True)), ""]
    val = {
        d.name: pd.read_csv(d / "validation" / "validation.csv")
        for d in dirs
        if (d / "validation" / "validation.csv").exists()
    }
    if val:
        lines += [_validation_section(val), ""]
    return atomic_write(out / "summary.md", "\n".join(lines))
