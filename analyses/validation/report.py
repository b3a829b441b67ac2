"""The causal-validation report: ``validation.csv``, ``unlabelled.csv``, ``validation.md`` and
``validation.json`` (which labels table it tested: path and SHA-256, so a validation of an older
``heads.csv`` can be told apart from one of the current table; ``interp summary`` checks it): the
files of ``OUTPUTS``, written by ``write`` as one output set (``interp.io.write_set``). The powered
run has its own set: ``POWERED_OUTPUTS``, written by ``write_powered``."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from analyses.validation.verdicts import VERDICTS, p_floor_problem
from interp.display import md_table
from interp.io import atomic_write, write_set

__all__ = [
    "report_markdown",
    "write",
    "write_outputs",
    "OUTPUTS",
    "RECORD",
    "POWERED_OUTPUTS",
    "powered_markdown",
    "write_powered",
]

OUTPUTS = ("validation.csv", "unlabelled.csv", "validation.md", "validation.json")
RECORD = "validation.json"


def report_markdown(result, labels_source: str, labels_sha256: str | None = None) -> str:
    t, info = result.table, result.info
    counts = t["verdict"].value_counts().reindex(list(VERDICTS), fill_value=0)
    sha = f" (sha256 `{labels_sha256}`)" if labels_sha256 else ""
    lines = [
        f"## Causal validation of head labels: {info['model']}",
        "",
        f"Labels: {labels_source}{sha}. Ablation: **{info['ablation']}** of `hook_z`, one head at a time, "
        f"{info['n_prompts']} prompts (seed {info['seed']}), {info['n_heads_evaluated']} heads evaluated, "
        f"null of {info['n_null']} random heads from all layers"
        + (f", at most {info['max_heads_per_role']} labelled heads per role" if info["max_heads_per_role"] else "")
        + ".",
        "",
        "Verdicts: " + ", ".join(f"{k}: {v}" for k, v in counts.items()) + f" (of {len(t)} labelled head-roles).",
        "",
        *_floor_warning(t, info["alpha"]),
        "Rule: *validated* = the effect (clean score - ablated score, higher score = better behaviour) has a "
        "95% bootstrap interval above 0, is at least `min_effect`, and its empirical p-value against random "
        f"heads (+1 corrected) is at most {info['alpha']} (smallest attainable: 1/(n_null+1)); `q_value` is "
        "Benjamini-Hochberg within each role over its 8 best labels by probe score (a family fixed before "
        "any ablation; the other labels have no q), for a false-discovery reading; *no effect* = the whole "
        "interval lies inside +-`min_effect` (an equivalence result); *inconclusive (under-powered)* = the "
        "interval does not clear zero but reaches beyond +-`min_effect` (absence of evidence); "
        "*inconclusive* = the rest.",
        "",
        "### Metrics",
        "",
    ]
    for m, d in info["metrics"].items():
        acc = info.get("clean_accuracy", {}).get(m)
        extra = f", clean held-out probe accuracy {acc:.2f}" if acc is not None else ""
        lines.append(f"- `{m}`: {d} (clean mean {info['clean'][m]:.3g}{extra})")
    show = t[
        [
            "layer",
            "head",
            "role",
            "metric",
            "effect",
            "ci_low",
            "ci_high",
            "null_mean",
            "null_std",
            "z",
            "p_value",
            "q_value",
            "p_value_layer",
            "verdict",
        ]
    ]
    lines += ["", "### Labelled heads", "", md_table(show)]
    lines += ["### Heads with large effects and no label for that behaviour", ""]
    u = result.unlabelled
    lines.append(md_table(u.drop(columns=["model"]).head(20), empty="(none)"))
    if info["n_null"] < info.get("n_heads_total", info["n_null"]):
        lines.append("Only evaluated heads (labelled ones and the random null sample) can appear here.\n")
    return "\n".join(lines) + "\n"


def _floor_warning(table, alpha: float) -> list[str]:
    """The report's loud line when the null is too small for any head to reach p <= alpha
    (``p_floor_problem``, on the largest null of the table's rows); else nothing."""
    n = table["n_null"].dropna() if "n_null" in table else table.iloc[:0]
    why = p_floor_problem(int(n.max()), alpha) if len(n) else ""
    return [f"**No head can be validated here**: {why}.", ""] if why else []


def write(result, folder, force: bool = False) -> Path:
    """Write ``OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``); the labels read
    (``result.labels_source``, ``labels_path``, ``labels_sha256``) are recorded in validation.json and
    validation.md. ``force``: replace files of these names that no toolkit run wrote. Returns
    ``folder``."""
    where = (result.labels_source, result.labels_path, result.labels_sha256)
    return write_set(
        folder, OUTPUTS, lambda tmp: _write_files(result, tmp, *where), command="interp validate", force=force
    )


def write_outputs(
    result, out_dir, labels_source: str = "given", labels_path: str | None = None, labels_sha256: str | None = None
) -> dict:
    """Deprecated: ``write`` (one output set; the labels read are the result's). Writes the four files
    into ``out_dir`` one by one, each atomically. Returns {name: path}."""
    warnings.warn(
        "analyses.validation.write_outputs is deprecated; use analyses.validation.write",
        DeprecationWarning,
        stacklevel=2,
    )
    return _write_files(result, out_dir, labels_source, labels_path, labels_sha256)


def _write_files(result, out_dir, labels_source: str, labels_path: str | None, labels_sha256: str | None) -> dict:
    """The four files of ``OUTPUTS`` into ``out_dir``, each atomically. Returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in OUTPUTS}
    info = result.info
    record = {
        "model": info.get("model"),
        "labels": labels_path,
        "labels_sha256": labels_sha256,
        "labels_source": labels_source,
        "n_labels": int(len(result.table)),
        **{k: info.get(k) for k in ("ablation", "seed", "n_prompts", "n_null", "alpha")},
    }
    atomic_write(paths["validation.csv"], result.table.to_csv(index=False))
    atomic_write(paths["unlabelled.csv"], result.unlabelled.to_csv(index=False))
    atomic_write(paths["validation.md"], report_markdown(result, labels_source, labels_sha256))
    atomic_write(paths[RECORD], json.dumps(record, indent=2, default=str) + "\n")
    return paths


POWERED_OUTPUTS = ("powered.csv", "groups.csv", "accuracy.csv", "powered.md", "powered.json")


def powered_markdown(result, labels_source: str, seconds: float | None = None) -> str:
    """The report section of ``run_powered``: the model's own accuracy per task, the group
    ablations and the single labelled heads."""
    info, t, g = result.info, result.table, result.groups
    took = f" It took {seconds:.0f} s ({info['ablated_prompt_runs']} ablated prompt runs)." if seconds else ""
    sinks = ", ".join(f"{r}: {c}" for r, c in info["sinks_left_out"].items()) or "none"
    lines = [
        f"## Powered causal validation: {info['model']}",
        "",
        f"Labels: {labels_source}. Ablation: **{info['ablation']}** of `hook_z`; up to {info['n']} prompts per "
        f"metric that the model solves (seed {info['seed']}); single heads against a layer-matched null of "
        f"{info['n_null']} heads (drawn from the labelled heads' layers, none labelled with the role), groups "
        f"against {info['n_group_null']} random groups with one head from each member's layer.{took} "
        f"Sink labels left out (background, not a behaviour): {sinks}.",
        "",
        "Rule: *validated* = the 95% bootstrap interval of the effect is above 0, the effect is at least "
        f"`min_effect`, and p (+1 corrected, against the layer-matched null) is at most {info['alpha']}; "
        "*no effect* = the whole interval inside +-`min_effect`; *inconclusive (under-powered)* = it does not "
        "clear zero and reaches beyond +-`min_effect`. `ablated_at`: the predictive readings at the answer "
        "position (the mean there over the reference prompts), every other role at all positions. "
        f"Input: {info.get('input', 'not recorded')}.",
        "",
        *_floor_warning(t, info["alpha"]),
        "### The model's own accuracy per task (prompts it gets wrong are dropped)",
        "",
        md_table(result.accuracy, empty="(prompts given)"),
        "### Group ablation: all labelled heads of a role at once",
        "",
        md_table(g.drop(columns=["model"]), empty="(no role with two or more labelled heads)"),
        "### Single labelled heads",
        "",
        md_table(t.drop(columns=["model"])),
    ]
    counts = t["verdict"].value_counts().to_dict()
    lines.append("Single-head verdicts: " + (", ".join(f"{k}: {v}" for k, v in counts.items()) or "none") + ".")
    return "\n".join(lines) + "\n"


def write_powered(result, folder, force: bool = False, seconds: float | None = None, **labels) -> Path:
    """Write ``POWERED_OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``), with the
    labels read (``result.labels_source``, ``labels_sha256``) and ``seconds`` (how long the run took)
    recorded in powered.json and powered.md. ``force``: replace files of these names that no toolkit
    run wrote. Returns ``folder``.

    Before the contract the labels were passed here (``write_powered(result, out_dir, labels_source,
    labels_sha256=...)``): given by keyword they are still taken, with a DeprecationWarning."""
    source, sha = result.labels_source, result.labels_sha256
    if isinstance(force, str):  # the old third argument, labels_source
        raise TypeError(
            f"write_powered(result, folder, force): force is True or False, got {force!r}; the labels' "
            "source is result.labels_source now"
        )
    unknown = sorted(set(labels) - {"labels_source", "labels_sha256"})
    if unknown:
        raise TypeError(f"write_powered() got unexpected keyword arguments {unknown}")
    if labels:
        warnings.warn(
            "write_powered(labels_source=..., labels_sha256=...) is deprecated; set them on the result",
            DeprecationWarning,
            stacklevel=2,
        )
        source, sha = labels.get("labels_source", source), labels.get("labels_sha256", sha)
    return write_set(
        folder,
        POWERED_OUTPUTS,
        lambda tmp: _write_powered_files(result, tmp, source, sha, seconds),
        command="interp validate --powered",
        force=force,
    )


def _write_powered_files(result, out_dir, labels_source: str, labels_sha256: str | None, seconds) -> dict:
    """The files of ``POWERED_OUTPUTS`` into ``out_dir``, each atomically; powered.json holds
    ``info`` without the contract's ``analysis`` and ``params`` (as before the contract). Returns
    {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in POWERED_OUTPUTS}
    info = {k: v for k, v in result.info.items() if k not in ("analysis", "params")}
    record = dict(info, labels_source=labels_source, labels_sha256=labels_sha256, seconds=seconds)
    atomic_write(paths["powered.csv"], result.table.to_csv(index=False))
    atomic_write(paths["groups.csv"], result.groups.to_csv(index=False))
    atomic_write(paths["accuracy.csv"], result.accuracy.to_csv(index=False))
    atomic_write(paths["powered.md"], powered_markdown(result, labels_source, seconds))
    atomic_write(paths["powered.json"], json.dumps(record, indent=2, default=str) + "\n")
    return paths
