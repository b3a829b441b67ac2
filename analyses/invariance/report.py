"""Invariance reports: the markdown section for the summary page, ``invariance.md``, a
self-contained ``invariance.html`` and the per-analysis CSVs and figures: the files of ``OUTPUTS``,
written by ``write`` as one output set (``interp.io.write_set``)."""

from __future__ import annotations

import base64
import warnings
from pathlib import Path

import pandas as pd

import analyses.invariance.conditioning as cond_mod
import analyses.invariance.permutation as perm_mod
import analyses.invariance.scale as scale_mod
from analyses.invariance.common import GUARD, SAFETY
from analyses.invariance.runner import InvarianceResult
from interp.display import md_table, png_bytes
from interp.io import atomic_write, write_set

__all__ = ["SECTION_INTRO", "OUTPUTS", "invariance_section", "figures", "write", "write_report"]

# the files an invariance run owns in its folder (``interp invariance`` opens its output set with these)
OUTPUTS = (
    "invariance.csv",
    "invariance_*.csv",
    "invariance.md",
    "invariance.html",
    "heads_positional.png",
    "conditioning.png",
    "sqrt_d.png",
    "order_leak.png",
    "relative_position.png",
)

SECTION_INTRO = (
    "Each row is a measurement on the model's real weights. `expected = holds`: an invariance, which "
    "passes when the measured difference is within the tolerance *and* the same metric on a different "
    f"input (the guard `baseline`) is more than {GUARD:g}x the tolerance, so a model that ignored its "
    "input could not pass. `expected = breaks`: a negative control, which passes when the difference "
    "exceeds the tolerance. Tolerances: a-priori floating-point bounds where the computation is short "
    f"(gamma_n = n u / (1 - n u)), otherwise {SAFETY:g}x the fp32 round-off floor measured against "
    "the same computation in fp64 (scaled by u64/u32 for fp64 runs)."
)


def invariance_section(df: pd.DataFrame, heading_level: int = 2) -> str:
    """A markdown section summarising an invariance table (one or several models), for the
    head-probing report."""
    if df.empty:
        raise ValueError("invariance_section: the table is empty; run analyses.invariance.run first")
    missing = [c for c in ("model", "check", "quantity", "value", "tolerance", "expected", "passed") if c not in df]
    if missing:
        raise ValueError(f"invariance_section: the table lacks columns {missing}; pass run(...).table")
    h = "#" * heading_level
    out = [f"{h} Invariances", "", SECTION_INTRO, ""]
    summary = (
        df.groupby(["model", "check"], sort=False).agg(rows=("passed", "size"), passed=("passed", "sum")).reset_index()
    )
    out += [md_table(summary, ["model", "check", "rows", "passed"]), ""]
    n_fail = int((~df.passed.astype(bool)).sum())
    out.append(
        f"**{len(df) - n_fail} of {len(df)} measurements agree with theory.**"
        + (f" Disagreements: {n_fail} (listed below)." if n_fail else "")
    )
    out.append("")
    for check, sub in df.groupby("check", sort=False):
        out += [
            f"{h}# {check}",
            "",
            md_table(
                sub, ["model", "quantity", "dtype", "value", "tolerance", "baseline", "expected", "passed", "detail"]
            ),
            "",
        ]
    return "\n".join(out)


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
    figs["heads_positional.png"] = png_bytes(ax.figure, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    cond_mod.conditioning_figure(result.conditioning, ax=ax)
    figs["conditioning.png"] = png_bytes(fig, bbox_inches="tight")
    figs["sqrt_d.png"] = png_bytes(scale_mod.scale_figure(result.scale), bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    sns.lineplot(data=result.order_leak, x="layer", y="leak_over_content", marker="o", ax=ax)
    ax.set(
        ylabel="order change / content change",
        title=f"{result.order_leak.model.iloc[0]}: order seen by the last token, no positions",
    )
    figs["order_leak.png"] = png_bytes(fig, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    sns.lineplot(data=result.relative_position, x="shift", y="value", hue="positional", marker="o", ax=ax)
    ax.set(xscale="log", yscale="symlog", ylabel="normalised score change", title="shift every position by s")
    ax.set_yscale("symlog", linthresh=1e-8)
    figs["relative_position.png"] = png_bytes(fig, bbox_inches="tight")
    return figs


def write(result: InvarianceResult, folder, force: bool = False, figures: bool = True) -> Path:
    """Write ``OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``): invariance.csv,
    the per-analysis CSVs, invariance.md (+ the PNGs, unless ``figures`` is false) and a
    self-contained invariance.html (figures inlined as base64). ``force``: replace files of these
    names that no toolkit run wrote. Returns ``folder``."""
    return write_set(
        folder, OUTPUTS, lambda tmp: _write_files(result, tmp, figures), command="interp invariance", force=force
    )


def write_report(result: InvarianceResult, out_dir, figures_too: bool = True) -> dict[str, Path]:
    """Deprecated: ``write`` (one output set). Writes the same files one by one, each atomically;
    returns name -> path."""
    warnings.warn(
        "analyses.invariance.write_report is deprecated; use analyses.invariance.write",
        DeprecationWarning,
        stacklevel=2,
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return _write_files(result, out, figures_too)


def _write_files(result: InvarianceResult, out: Path, figures_too: bool) -> dict[str, Path]:
    """The files of ``OUTPUTS`` into ``out``, each atomically. Returns name -> path."""
    out = Path(out)
    written = {}

    def put(name, data: bytes):
        atomic_write(out / name, data)
        written[name] = out / name

    put("invariance.csv", result.table.to_csv(index=False).encode())
    for name, df in (
        ("invariance_heads.csv", result.per_head),
        ("invariance_order_leak.csv", result.order_leak),
        ("invariance_conditioning.csv", result.conditioning),
        ("invariance_interpretation.csv", result.interpretation),
        ("invariance_relative_position.csv", result.relative_position),
        ("invariance_sqrt_d.csv", result.scale),
    ):
        put(name, df.to_csv(index=False).encode())
    figs = figures(result) if figures_too else {}
    for name, png in figs.items():
        put(name, png)
    md = [f"# Invariance report: {', '.join(result.table.model.unique())}", "", invariance_section(result.table), ""]
    interp = result.interpretation
    md += [
        "## What can be interpreted (one head, fp64)",
        "",
        md_table(
            interp,
            [
                "layer",
                "head",
                "quantity",
                "change_orthogonal",
                "invariant_orthogonal",
                "change_invertible",
                "invariant_invertible",
                "passed",
            ],
        ),
        "",
    ]
    md += [
        "## Conditioning of W_Q A, W_K A^-T",
        "",
        md_table(
            result.conditioning,
            ["cond", "dtype", "relative_error", "relative_error_over_u_cond", "normalized_error", "bound"],
        ),
        "",
    ]
    for name in figs:
        md += [f"![{name}]({name})", ""]
    md_text = "\n".join(md)
    put("invariance.md", md_text.encode())
    put("invariance.html", _html(md_text, result, figs).encode())
    return written


def _html(md_text: str, result: InvarianceResult, figs: dict[str, bytes]) -> str:
    """Self-contained HTML through the pages' base template and stylesheet (``analyses.html``): the
    tables as HTML (pandas escapes every cell), figures inlined."""
    from analyses.html import render

    def table(df: pd.DataFrame) -> str:
        return df.to_html(index=False, float_format=lambda x: f"{x:.3g}", classes="t")

    tables = [
        (str(check), table(sub.drop(columns=["check"]))) for check, sub in result.table.groupby("check", sort=False)
    ]
    tables += [("What can be interpreted", table(result.interpretation)), ("Conditioning", table(result.conditioning))]
    return render(
        "invariance.html",
        title=f"Invariance report: {', '.join(result.table.model.unique())}",
        script=False,
        intro=SECTION_INTRO,
        tables=tables,
        figures=[(name, f"data:image/png;base64,{base64.b64encode(png).decode()}") for name, png in figs.items()],
    )
