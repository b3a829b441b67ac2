"""The sink-by-length analysis' report: the figure (``figure``), the markdown (``report``) and the
output set (``OUTPUTS``, ``write``: the tables of ``analyses.longctx.sinks_measure`` as CSV, sinks.md
and sinks.png, through ``interp.io.write_set``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analyses.longctx.sinks_measure import (
    GU_EPSILON,
    LEARNED_SINK,
    MASS_MARGIN,
    ROLES,
    SinksResult,
    head_table,
    layer_table,
    length_summary,
    main_rows,
    persistence,
    position_table,
)

__all__ = ["OUTPUTS", "ROLE_TITLES", "figure", "report", "tables", "write"]

ROLE_TITLES = {
    "attention_sink": "sink share (attention on position 0)",
    "previous_token": "previous-token score",
    "induction": "induction score (repeated text; ceiling 0.5)",
    LEARNED_SINK: "learned sink share (the head's sink logit's part of each softmax row)",
}


def figure(run: SinksResult, heads: pd.DataFrame):
    """Four panels: per role, every head's score against length (thin lines; heads carrying the role
    at the shortest length in colour) with the mean over heads (95% interval over windows); and the
    sink share by query position, one line per length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    main = main_rows(run.windows)
    shortest = heads["length"].min()
    for ax, role in zip(axes, ROLES):
        h = heads[heads["role"] == role].assign(unit=lambda d: d["layer"] * 1000 + d["head"])
        sns.lineplot(data=h, x="length", y="score", units="unit", estimator=None, color="0.6", lw=0.4, alpha=0.3, ax=ax)
        first = h[(h["length"] == shortest) & h["label"]]["unit"]
        if len(first):
            sns.lineplot(
                data=h[h["unit"].isin(first)], x="length", y="score", units="unit", estimator=None, color="C1",
                lw=0.8, alpha=0.6, ax=ax,
            )  # fmt: skip
        m = main[main["role"] == role].groupby(["length", "window"])["score"].mean().reset_index()
        sns.lineplot(data=m, x="length", y="score", color="C0", lw=2.2, marker="o", errorbar=("ci", 95), ax=ax)
        ax.set(xscale="log", title=ROLE_TITLES[role], xlabel="context length (tokens)", ylabel="score")
        _log_ticks(ax, sorted(heads["length"].unique()))
    pos = position_table(run)
    sns.lineplot(data=pos, x="pos_lo", y="sink", hue="length", marker="o", palette="viridis", ax=axes[3])
    uni = pos.drop_duplicates("pos_lo")
    axes[3].plot(uni["pos_lo"], uni["uniform"], "k--", lw=1, label="uniform head")
    axes[3].legend(fontsize=8, title="length", title_fontsize=8)
    axes[3].set(
        xscale="log", title="sink share by query position", xlabel="query position (bin start)",
        ylabel="mean sink share over heads",
    )  # fmt: skip
    _log_ticks(axes[3], sorted(uni["pos_lo"].unique())[::2])
    fig.suptitle(
        f"{run.model}: blue = mean over heads (95% CI over windows), orange = heads labelled at {shortest} "
        f"tokens (effect > {MASS_MARGIN:g}), grey = every head",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def _log_ticks(ax, ticks) -> None:
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(list(ticks), [str(int(x)) for x in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


def report(run: SinksResult, heads: pd.DataFrame, summary: pd.DataFrame, persist: pd.DataFrame) -> str:
    from interp.display import md_table

    layers = layer_table(heads)
    sink_layers = layers[layers["role"] == "attention_sink"].pivot(index="layer", columns="length", values="score")
    sink_layers.columns = [f"{c} tokens" for c in sink_layers.columns]
    top = []
    learned = LEARNED_SINK in set(heads["role"])
    for role in (*ROLES, LEARNED_SINK) if learned else ROLES:
        h = heads[heads["role"] == role]
        best = h.groupby(["layer", "head"])["score"].max().nlargest(8).index
        piv = (
            h.set_index(["layer", "head"])
            .loc[best]
            .reset_index()
            .pivot(index=["layer", "head"], columns="length", values="score")
        )
        piv.columns = [f"{c}" for c in piv.columns]
        piv = piv.reset_index()
        name = [f"L{a}H{b}" for a, b in zip(piv.pop("layer"), piv.pop("head"))]
        piv.insert(0, "head", name)
        top.append(f"**{role}** (mean score over windows; the 8 heads with the largest score at any length)\n\n")
        top.append(md_table(piv))
    cpu = summary.groupby("length")[["cpu_s_per_window", "wall_s_per_window"]].first().reset_index()
    total_cpu = float(run.cost["cpu_s"].sum())
    return (
        f"# {run.model}: the sink and head roles by context length\n\n"
        f"Sink: {run.attrs.get('sink')}; seed {run.attrs.get('seed')}; a head carries a role where its mean "
        f"score over windows exceeds a uniform head's by {MASS_MARGIN:g} (the probe's `mass_margin`). "
        "Sink share and previous-token score on real text (BoolQ passages), induction on the same text "
        "with its second half repeating its first. Intervals: 95% t over windows (mean score), "
        "percentile bootstrap over windows (head counts). `gu_ratio`: Gu et al.'s (2024) sink metric beside "
        f"the project's, the share of heads whose mean attention on position 0 exceeds {GU_EPSILON:g}.\n\n"
        + (
            f"**{LEARNED_SINK}**: this model has a learned sink logit per head (gpt-oss), one more column of "
            "every softmax row with no value; its share is 1 minus the pattern's row sum, averaged over the "
            "rows the sink share is scored on (a head without one: 0). A head can park its attention there "
            "instead of on position 0, so read the two sink rows together.\n\n"
            if learned
            else ""
        )
        + "## By length\n\n"
        + md_table(
            summary,
            [
                "role",
                "length",
                "n_windows",
                "mean_score",
                "ci_low",
                "ci_high",
                "n_label",
                "n_label_low",
                "n_label_high",
                "gu_ratio",
            ],
        )
        + "\n## Do roles persist?\n\n"
        + md_table(persist)
        + "\n## Sink share by query position (text input; mean over heads and windows)\n\n"
        + md_table(position_table(run))
        + "\n## Sink share by layer (mean over the layer's heads)\n\n"
        + md_table(sink_layers.reset_index())
        + "\n## Heads\n\n"
        + "\n".join(top)
        + "\n## Cost\n\n"
        + md_table(cpu)
        + f"\nTotal CPU time of the forwards: {total_cpu:.0f} s (process time, all threads; eager attention).\n"
    )


OUTPUTS = (
    "sinks_windows.csv",
    "sinks_heads.csv",
    "sinks_layers.csv",
    "sinks_summary.csv",
    "sinks_persistence.csv",
    "sinks_positions.csv",
    "sinks.md",
    "sinks.png",
)


def tables(result: SinksResult) -> dict[str, pd.DataFrame]:
    """The tables the output set holds, by name: heads, layers, summary, persistence, positions."""
    heads = head_table(result)
    return dict(
        heads=heads,
        layers=layer_table(heads),
        summary=length_summary(result),
        persistence=persistence(heads),
        positions=position_table(result),
    )


def write(result: SinksResult, folder, force: bool = False) -> Path:
    """Write ``OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``; inside a set
    already open there, into its staging folder). Returns ``folder``."""
    from interp.io import write_set

    return write_set(folder, OUTPUTS, lambda tmp: _write_files(result, tmp), command="interp sinks", force=force)


def _write_files(result: SinksResult, folder: Path) -> None:
    from interp.display import png_bytes

    t = tables(result)
    result.windows.to_csv(folder / "sinks_windows.csv", index=False)
    for name in ("heads", "layers", "summary", "persistence", "positions"):
        t[name].to_csv(folder / f"sinks_{name}.csv", index=False)
    (folder / "sinks.md").write_text(report(result, t["heads"], t["summary"], t["persistence"]), encoding="utf-8")
    (folder / "sinks.png").write_bytes(png_bytes(figure(result, t["heads"]), dpi=80))
