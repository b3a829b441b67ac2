"""The circuit report: ``tasks.csv`` (the model's accuracy on every task), ``nodes.csv`` (every
head and MLP: attribution scores per method, exact patching), ``edges.csv`` (the top edges per
method), ``faithfulness.csv`` (the curve: method, proportion, k, draw, metric, faithfulness),
``summary.csv`` (per method and level: CPR / CMD, ``mean_f_p_le_0.1`` and ``mean_f_log_p``, their
95% bootstrap intervals over pairs), ``faithfulness.png``, ``circuit.png``, ``report.md`` and
``circuit.json`` (settings, times, the drawn circuit). ``head_importance`` is the per-head view the
report page's head detail shows beside the pattern role."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from analyses.circuits.figures import circuit_figure, faithfulness_figure
from analyses.circuits.run import CircuitResult
from interp.display import fmt, md_table
from interp.io import atomic_write, write_set

__all__ = [
    "OUTPUTS",
    "CIRCUITS_DIR",
    "report_markdown",
    "summary_table",
    "files",
    "write",
    "write_outputs",
    "head_importance",
    "read_head_importance",
    "page_circuits",
    "all_curves",
]

# where a model's page looks for circuit runs: <model folder>/circuits/<task>/ (interp circuit --out)
CIRCUITS_DIR = "circuits"

OUTPUTS = (
    "tasks.csv",
    "nodes.csv",
    "edges.csv",
    "faithfulness.csv",
    "summary.csv",
    "faithfulness.png",
    "circuit.png",
    "report.md",
    "circuit.json",
)


def _times(info: dict) -> str:
    parts = [f"{k[2:].replace('_', ' ')} {v:.1f} s" for k, v in info.items() if k.startswith("t_")]
    return ", ".join(parts)


def _curve_table(curve: pd.DataFrame) -> pd.DataFrame:
    """Mean faithfulness per method and proportion (random: mean over draws), methods as columns."""
    t = curve.groupby(["proportion", "k", "method"], sort=False)["faithfulness"].mean().unstack("method")
    return t.reset_index()


def report_markdown(result: CircuitResult) -> str:
    info, ct = result.info, result.task
    lines = [f"## Circuits: {result.model_name}, task `{ct.name}`", "", "### Tasks: does the model show the behaviour?"]
    lines += [
        "",
        "Accuracy = share of generated pairs whose clean logit difference (right - wrong answer) is > 0; "
        f"a task is solved at >= {ct.min_accuracy:.0%} with >= {ct.min_pairs} solved pairs. Only solved pairs "
        "are used: circuits are scored on the discovery pairs and evaluated on the held-out ones.",
        "",
        md_table(result.tasks),
    ]
    unsolved = result.tasks[~result.tasks["solved"]]
    if len(unsolved):
        lines.append("Not solved: " + "; ".join(f"`{r.task}` ({r.note})" for r in unsolved.itertuples()) + ".\n")
    if not ct.solved:
        lines.append(f"**No circuit analysis for `{ct.name}`**: {ct.why_not()}.\n")
        return "\n".join(lines)
    curve = result.curve
    lines += [
        "### Faithfulness",
        "",
        f"{len(ct.evaluation)} held-out pairs. A circuit of k nodes (heads and MLPs, of "
        f"{curve.attrs['n_nodes']}) runs on the clean prompt with every node outside it **patched from the "
        "corrupted run** (activation patching, not mean ablation); the input is in every non-empty circuit. "
        "f = (m(circuit) - m(corrupted)) / (m(clean) - m(corrupted)) with m the mean logit difference "
        f"(clean {fmt(curve.attrs['clean'])}, corrupted {fmt(curve.attrs['corrupted'])}): 0 is the corrupted "
        "run, 1 the clean one. Sizes are MIB's proportions; CPR = area under f (higher is better), CMD = area "
        "under |1 - f| (0 is best), trapezoids over the proportion as in MIB (Mueller et al. 2025), where sizes "
        "above half the nodes carry half the weight. So two means of f as well (a constant curve c gives c): "
        "mean f for p <= 0.1 (the area over [p_min, 0.1] over its width: the small circuits) and mean f on log p "
        "(the area over log p over the log axis's width: each decade of sizes alike). Brackets: 95% bootstrap "
        "intervals over the held-out pairs (resampled with replacement, f renormalised by each resample's gap). "
        "Random: "
        f"{int(curve[curve.method == 'random'].draw.nunique())} circuits per size (mean and sd over draws); "
        "pattern_labels: the head report's labelled heads for the task's role first, then the others by "
        "role score, MLPs last"
        + (
            f" (the {info['label_reading']} reading of the role's labels)."
            if info.get("label_reading", "-") != "-"
            else "."
        ),
        "",
        *_gap_warning(curve),
        "![faithfulness](faithfulness.png)",
        "",
        md_table(summary_table(result.summary)),
        md_table(_curve_table(curve)),
    ]
    if result.edge_curve is not None:
        e = result.edge_curve
        lines += [
            f"Edge level ({e.attrs['n_nodes']} edges; a circuit keeps its edges clean and every other edge carries "
            "the corrupted run's writer output, `patch_edges`; the same proportions):",
            "",
            md_table(_curve_table(e)),
        ]
    if result.agreement is not None:
        lines += [
            "### Attribution against exact patching",
            "",
            "Spearman's rho over heads between each method's node score and the exact effect of patching "
            "that head alone from the corrupted run into the clean run (m(patched) - m(clean): what the "
            "attribution's linear estimate approximates); attribution on the "
            f"{len(ct.discovery)} discovery pairs, exact patching on the first "
            f"{result.info.get('exact_pairs', len(ct.discovery))} of them.",
            "",
            md_table(result.agreement),
        ]
    lines += ["### Top nodes", "", md_table(_top_rows(result.nodes))]
    if result.edges is not None:
        lines += ["### Top edges", "", md_table(result.edges.groupby("method", sort=False).head(10))]
    else:
        lines.append(f"Edges: not scored ({info.get('edges', 'not asked for')}).\n")
    lines += [
        "### The circuit drawn",
        "",
        f"{len(result.circuit) - 1} nodes (the smallest top circuit of the best method with f >= 0.8, at most 40): "
        + ", ".join(f"`{n}`" for n in result.circuit[1:]),
        "",
        "![circuit](circuit.png)",
        "",
        f"Times: {_times(info)}.",
        "",
    ]
    return "\n".join(lines)


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as report.md shows it: per method and level each statistic with its 95% interval
    ("0.812 [0.774, 0.846]"; the point alone where there is none), random's sd over draws."""

    def cell(row: pd.Series, stat: str) -> str:
        lo, hi = row.get(f"{stat}_ci95_lo"), row.get(f"{stat}_ci95_hi")
        point = fmt(row[stat], 3, fixed=True) if pd.notna(row[stat]) else ""
        return f"{point} [{fmt(lo, 3, fixed=True)}, {fmt(hi, 3, fixed=True)}]" if pd.notna(lo) else point

    named = {
        "cpr": "CPR [95% CI]",
        "cmd": "CMD [95% CI]",
        "mean_f_p_le_0.1": "mean f, p <= 0.1 [95% CI]",
        "mean_f_log_p": "mean f on log p [95% CI]",
    }
    rows = []
    for _, r in summary.iterrows():
        row = {"method": r["method"], "level": r.get("level", "node")}
        row.update({name: cell(r, stat) for stat, name in named.items() if stat in r.index})
        row["sd of CPR over draws"] = fmt(r["cpr_sd"], 3, fixed=True) if pd.notna(r.get("cpr_sd")) else ""
        row["draws"] = int(r["draws"])
        rows.append(row)
    return pd.DataFrame(rows)


def _gap_warning(curve: pd.DataFrame) -> list[str]:
    from interp.interventions import MIN_GAP

    gap = curve.attrs["gap"]
    if abs(gap) >= MIN_GAP:
        return []
    return [
        f"**Warning**: the clean - corrupted gap on the held-out pairs is {fmt(gap)} (below {MIN_GAP}): f divides "
        "by noise here, so read the curve as unreliable.",
        "",
    ]


def _top_rows(nodes: pd.DataFrame, n: int = 15) -> pd.DataFrame:
    methods = [c for c in ("eap-ig", "eap") if c in nodes.columns]
    if not methods:
        return nodes.head(0)
    return nodes.reindex(nodes[methods[0]].abs().sort_values(ascending=False).index).head(n)


def files(result: CircuitResult) -> dict[str, str | bytes]:
    """The report's files by name (those of ``OUTPUTS`` that apply: a step that did not run, e.g.
    for an unsolved task, writes none)."""
    out: dict[str, str | bytes] = {"tasks.csv": result.tasks.to_csv(index=False)}
    if result.nodes is not None:
        out["nodes.csv"] = result.nodes.to_csv(index=False)
    if result.edges is not None:
        out["edges.csv"] = result.edges.to_csv(index=False)
    if result.curve is not None:
        curves = all_curves(result)
        out["faithfulness.csv"] = curves.to_csv(index=False)
        out["summary.csv"] = result.summary.to_csv(index=False)
        title = f"{result.model_name}: {result.task.name}, {len(result.task.evaluation)} held-out pairs"
        out["faithfulness.png"] = faithfulness_figure(curves, title=title)
        scores = None
        if result.nodes is not None:
            col = next((c for c in ("eap-ig", "eap") if c in result.nodes.columns), None)
            if col:
                scores = pd.Series(result.nodes[col].to_numpy(float), index=result.nodes["node"])
        v = result.nodes
        n_layers = int(v["layer"].max()) + 1 if v is not None else None
        n_heads = int(pd.to_numeric(v["head"], errors="coerce").max()) + 1 if v is not None else None
        title = f"top circuit: {result.task.name}"
        out["circuit.png"] = circuit_figure(
            result.circuit, _graph_edges(result), scores, n_layers, n_heads, title=title
        )
    out["report.md"] = report_markdown(result)
    record = dict(result.info, circuit=result.circuit, solved=bool(result.task.solved))
    out["circuit.json"] = json.dumps(record, indent=2, default=str) + "\n"
    return out


def _write_files(result: CircuitResult, out_dir: str | Path) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return {name: atomic_write(out / name, data) for name, data in files(result).items()}


def write(result: CircuitResult, folder: str | Path, force: bool = False) -> Path:
    """Write the report's files (``files``) into ``folder`` as one output set (``interp.io.write_set``;
    inside a command's open set, into its staging folder). Returns ``folder``."""
    return write_set(folder, OUTPUTS, lambda tmp: _write_files(result, tmp), command="interp circuit", force=force)


def write_outputs(result: CircuitResult, out_dir: str | Path) -> dict[str, Path]:
    """Deprecated: ``write(result, folder)`` (one output set). Writes the files straight into
    ``out_dir``, each atomically, and returns {name: path} as before."""
    warnings.warn("write_outputs is deprecated; use analyses.circuits.write", DeprecationWarning, stacklevel=2)
    return _write_files(result, out_dir)


def all_curves(result: CircuitResult) -> pd.DataFrame:
    """The node-level curve and, where edges were scored, the edge-level one, with a ``level`` column."""
    parts = [result.curve.assign(level="node")]
    if result.edge_curve is not None:
        parts.append(result.edge_curve.assign(level="edge"))
    return pd.concat(parts, ignore_index=True)


def _graph_edges(result: CircuitResult) -> pd.DataFrame | None:
    if result.edges is None:
        return None
    methods = list(dict.fromkeys(result.edges["method"]))
    best = "eap-ig" if "eap-ig" in methods else methods[0]
    return result.edges[result.edges["method"] == best]


def head_importance(nodes: pd.DataFrame, task: str) -> pd.DataFrame:
    """Per head: task, layer, head, importance (the exact patching effect normalised by the gap,
    negated so that 1 = the head alone carries the whole behaviour; the attribution score where no
    exact patching ran) and the attribution scores: what the page's head detail shows."""
    heads = nodes[nodes["head"].astype(str) != "mlp"].copy()
    heads["head"] = heads["head"].astype(int)
    out = heads[["layer", "head"]].assign(task=task)
    if "exact_normalised" in heads.columns:
        out["importance"] = -heads["exact_normalised"].to_numpy(float)
    for m in ("eap", "eap-ig"):
        if m in heads.columns:
            out[m] = heads[m].to_numpy(float)
    return out.reset_index(drop=True)


def read_head_importance(folder: str | Path) -> pd.DataFrame | None:
    """``head_importance`` from a circuit output folder (its nodes.csv and circuit.json), or None."""
    folder = Path(folder)
    if not (folder / "nodes.csv").is_file() or not (folder / "circuit.json").is_file():
        return None
    info: dict[str, Any] = json.loads((folder / "circuit.json").read_text(encoding="utf-8"))
    return head_importance(pd.read_csv(folder / "nodes.csv"), str(info.get("task")))


def page_circuits(model_dir: str | Path) -> dict[str, list[dict]]:
    """What the model page's head detail shows beside the pattern role: for every circuit run under
    ``model_dir/circuits/*/`` (``interp circuit --out``), per head ``"layer,head"`` a list of {task,
    importance, eap, eap_ig} (numbers rounded to 4 significant digits; None where not computed)."""
    out: dict[str, list[dict]] = {}
    root = Path(model_dir) / CIRCUITS_DIR
    if not root.is_dir():
        return out

    def num(x: Any) -> float | None:
        return None if x is None or pd.isna(x) else float(f"{float(x):.4g}")

    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        table = read_head_importance(folder)
        if table is None:
            continue
        for r in table.to_dict("records"):
            out.setdefault(f"{int(r['layer'])},{int(r['head'])}", []).append(
                {
                    "task": str(r["task"]),
                    "importance": num(r.get("importance")),
                    "eap": num(r.get("eap")),
                    "eap_ig": num(r.get("eap-ig")),
                }
            )
    return out
