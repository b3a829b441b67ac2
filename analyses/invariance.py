"""Invariance checks on real weights: one table, one row per measurement, a verdict per row.

>>> import models
>>> from analyses import invariance
>>> model = models.load("minilm")
>>> result = invariance.run_all(model)
>>> result.table[["check", "quantity", "value", "tolerance", "expected", "passed"]]

Columns of the table (``ROW_COLUMNS``): ``model, check, quantity, value, tolerance, expected,
passed, baseline, dtype, tolerance_rule, detail``. ``expected`` is ``holds`` (an invariance: value
must be <= tolerance, and the guard ``baseline`` — the same metric for a different input — must
be far above the tolerance) or ``breaks`` (a negative control: value must exceed the tolerance).

The checks live in four modules, each usable on its own:

* ``analyses.invariance_permutation``: order blindness (one layer, whole model, the causal mask's
  leak, per-head content vs position);
* ``analyses.invariance_rotation``: W_Q/W_K and W_V/W_O rotations, invertible A and its condition
  number, RoPE planes, grouped-query groups, what can be interpreted (FactoredMatrix);
* ``analyses.invariance_position``: relative position (RoPE, ALiBi) vs absolute;
* ``analyses.invariance_scale``: the 1/sqrt(d) scale.

The model passed in is never changed: edits happen on ``copy.deepcopy`` copies.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

from analyses.report import atomic_write
from analyses import invariance_permutation as perm_mod
from analyses import invariance_position as pos_mod
from analyses import invariance_rotation as rot_mod
from analyses import invariance_scale as scale_mod
from analyses.invariance_common import (
    GUARD,
    ROW_COLUMNS,
    SAFETY,
    double_copy,
    make_row,
    model_name,
    model_tokens,
    random_orthogonal,
    relerr,
)

__all__ = [
    "InvarianceResult",
    "run_all",
    "invariance_section",
    "write_report",
    "ROW_COLUMNS",
    "random_orthogonal",
    "relerr",
    "make_row",
]


@dataclass
class InvarianceResult:
    table: pd.DataFrame  # one row per check (ROW_COLUMNS)
    per_head: pd.DataFrame  # layer x head TV distances (content vs position)
    order_leak: pd.DataFrame  # causal order leak per layer
    conditioning: pd.DataFrame  # cond(A) sweep
    interpretation: pd.DataFrame  # what changes / what does not under rotation
    relative_position: pd.DataFrame  # per shift
    scale: pd.DataFrame  # sqrt(d) sweep
    extras: dict = field(default_factory=dict)


def run_all(model, text: Optional[str] = None, n_tokens: int = 16, seed: int = 0, progress: bool = False) -> InvarianceResult:
    """Run every check on ``model`` (never modified). ``n_tokens`` bounds the input length."""
    from tqdm.auto import tqdm

    tokens = model_tokens(model, text, n_tokens=n_tokens, seed=seed)
    m64 = double_copy(model)
    steps = tqdm(total=8, desc=f"invariance {model_name(model)}", disable=not progress)
    parts = []

    def step(df):
        parts.append(df)
        steps.update(1)

    step(perm_mod.layer_permutation(model, tokens, seed=seed, model64=m64))
    # ALiBi's bias cannot be removed by a hook, so model_permutation only measures "with positions"
    step(perm_mod.model_permutation(model, tokens, seed=seed, model64=m64))
    leak, leak_rows = perm_mod.causal_order_leak(model, tokens, seed=seed, model64=m64)
    step(leak_rows)
    per_head = perm_mod.head_position_sensitivity(model, tokens, seed=seed, model64=m64)
    nopos = (
        None if model.cfg.positional == "alibi"
        else perm_mod.head_position_sensitivity(model, tokens, seed=seed, model64=m64, remove_positions=True)
    )
    step(perm_mod.head_sensitivity_rows(model, per_head, nopos))
    step(rot_mod.model_rotation_checks(model, tokens, seed=seed, model64=m64))
    del m64
    sweep = rot_mod.conditioning_sweep(model, tokens, seed=seed)
    step(pd.concat([rot_mod.conditioning_rows(model, sweep), rot_mod.conditioning_negative(model, tokens, seed=seed)]))
    interp_tab = pd.concat([rot_mod.interpretation_table(model, l, 0, tokens, seed=seed) for l in (0, model.cfg.n_layers - 1)])
    rel_tab, rel_rows = pos_mod.relative_position_checks(model, seed=seed)
    step(pd.concat([rot_mod.interpretation_rows(interp_tab), rel_rows]))
    scale_tab = scale_mod.scale_sweep(model, seed=seed)
    step(scale_mod.scale_rows(model_name(model), scale_tab))
    steps.close()
    table = pd.concat(parts, ignore_index=True)[ROW_COLUMNS]
    if per_head is not None and nopos is not None:
        per_head = pd.concat([per_head, nopos], ignore_index=True)
    return InvarianceResult(table, per_head, leak, sweep, interp_tab, rel_tab, scale_tab)


# -- reporting ----------------------------------------------------------------------------------------

SECTION_INTRO = (
    "Each row is a measurement on the model's real weights. `expected = holds`: an invariance, which "
    "passes when the measured difference is within the tolerance *and* the same metric on a different "
    f"input (the guard `baseline`) is more than {GUARD:g}x the tolerance, so a model that ignored its "
    "input could not pass. `expected = breaks`: a negative control, which passes when the difference "
    "exceeds the tolerance. Tolerances: a-priori floating-point bounds where the computation is short "
    f"(gamma_n = n u / (1 - n u)), otherwise {SAFETY:g}x the fp32 round-off floor measured against "
    "the same computation in fp64 (scaled by u64/u32 for fp64 runs)."
)


def _fmt(x) -> str:
    if isinstance(x, float):
        if x != x:
            return ""
        return f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 or x == 0 else f"{x:.2e}"
    return str(x)


def _markdown_table(df: pd.DataFrame, columns) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, r in df.iterrows():
        cells = [_fmt(r[c]).replace("|", "\\|") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def invariance_section(df: pd.DataFrame, heading_level: int = 2) -> str:
    """A markdown section summarising an invariance table (one or several models), for the
    head-probing report."""
    if df.empty:
        raise ValueError("invariance_section: the table is empty; run run_all first")
    missing = [c for c in ("model", "check", "quantity", "value", "tolerance", "expected", "passed") if c not in df]
    if missing:
        raise ValueError(f"invariance_section: the table lacks columns {missing}; pass run_all(...).table")
    h = "#" * heading_level
    out = [f"{h} Invariances", "", SECTION_INTRO, ""]
    summary = df.groupby(["model", "check"], sort=False).agg(rows=("passed", "size"), passed=("passed", "sum")).reset_index()
    out += [_markdown_table(summary, ["model", "check", "rows", "passed"]), ""]
    n_fail = int((~df.passed.astype(bool)).sum())
    out.append(f"**{len(df) - n_fail} of {len(df)} measurements agree with theory.**" + (
        f" Disagreements: {n_fail} (listed below)." if n_fail else ""))
    out.append("")
    for check, sub in df.groupby("check", sort=False):
        out += [f"{h}# {check}", "", _markdown_table(sub, ["model", "quantity", "dtype", "value", "tolerance", "baseline", "expected", "passed", "detail"]), ""]
    return "\n".join(out)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def figures(result: InvarianceResult) -> dict[str, bytes]:
    """name -> PNG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import seaborn as sns

    figs = {}
    ph = result.per_head
    with_pos = ph[~ph.positions_removed] if "positions_removed" in ph else ph
    ax = perm_mod.tv_heatmap(with_pos)
    figs["heads_positional.png"] = _png(ax.figure)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    rot_mod.conditioning_figure(result.conditioning, ax=ax)
    figs["conditioning.png"] = _png(fig)
    figs["sqrt_d.png"] = _png(scale_mod.scale_figure(result.scale))
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    sns.lineplot(data=result.order_leak, x="layer", y="leak_over_content", marker="o", ax=ax)
    ax.set(ylabel="order change / content change", title=f"{result.order_leak.model.iloc[0]}: order seen by the last token, no positions")
    figs["order_leak.png"] = _png(fig)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    sns.lineplot(data=result.relative_position, x="shift", y="value", hue="positional", marker="o", ax=ax)
    ax.set(xscale="log", yscale="symlog", ylabel="normalised score change", title="shift every position by s")
    ax.set_yscale("symlog", linthresh=1e-8)
    figs["relative_position.png"] = _png(fig)
    return figs


def write_report(result: InvarianceResult, out_dir, figures_too: bool = True) -> dict[str, Path]:
    """Write invariance.csv, the per-analysis CSVs, invariance.md (+ PNGs) and a self-contained
    invariance.html (figures inlined as base64), each atomically. Returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}

    def put(name, data: bytes):
        atomic_write(out / name, data)
        written[name] = out / name

    put("invariance.csv", result.table.to_csv(index=False).encode())
    for name, df in (("invariance_heads.csv", result.per_head), ("invariance_order_leak.csv", result.order_leak),
                     ("invariance_conditioning.csv", result.conditioning), ("invariance_interpretation.csv", result.interpretation),
                     ("invariance_relative_position.csv", result.relative_position), ("invariance_sqrt_d.csv", result.scale)):
        put(name, df.to_csv(index=False).encode())
    figs = figures(result) if figures_too else {}
    for name, png in figs.items():
        put(name, png)
    md = [f"# Invariance report: {', '.join(result.table.model.unique())}", "", invariance_section(result.table), ""]
    interp = result.interpretation
    md += ["## What can be interpreted (one head, fp64)", "",
           _markdown_table(interp, ["layer", "head", "quantity", "change_orthogonal", "invariant_orthogonal", "change_invertible", "invariant_invertible", "passed"]), ""]
    md += ["## Conditioning of W_Q A, W_K A^-T", "", _markdown_table(result.conditioning, ["cond", "dtype", "relative_error", "relative_error_over_u_cond", "normalized_error", "bound"]), ""]
    for name in figs:
        md += [f"![{name}]({name})", ""]
    md_text = "\n".join(md)
    put("invariance.md", md_text.encode())
    put("invariance.html", _html(md_text, result, figs).encode())
    return written


def _html(md_text: str, result: InvarianceResult, figs: dict[str, bytes]) -> str:
    """Self-contained HTML: the tables as HTML, figures inlined."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Invariance report</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px}.fail{background:#fdd}</style></head><body>",
        f"<h1>Invariance report: {html.escape(', '.join(result.table.model.unique()))}</h1>",
        f"<p>{html.escape(SECTION_INTRO)}</p>",
    ]
    t = result.table.copy()
    for check, sub in t.groupby("check", sort=False):
        parts.append(f"<h2>{html.escape(check)}</h2>")
        parts.append(sub.drop(columns=["check"]).to_html(index=False, float_format=lambda x: f"{x:.3g}", classes="t"))
    parts.append("<h2>What can be interpreted</h2>")
    parts.append(result.interpretation.to_html(index=False, float_format=lambda x: f"{x:.3g}"))
    parts.append("<h2>Conditioning</h2>")
    parts.append(result.conditioning.to_html(index=False, float_format=lambda x: f"{x:.3g}"))
    for name, png in figs.items():
        parts.append(f"<h3>{html.escape(name)}</h3><img src='data:image/png;base64,{base64.b64encode(png).decode()}'/>")
    parts.append("</body></html>")
    return "\n".join(parts)
