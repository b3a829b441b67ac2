"""IOI's circuit against Wang et al. (2022)'s head classes, by their own criteria.

On the IOI pairs the model solves ("When Mary and John went to the store, John gave a drink to" ->
" Mary"; corrupted: the subject's second mention S2 replaced by a third name, Wang et al.'s ABC), the
circuit's heads are the top ``top`` heads by |EAP-IG score| (the attribution ``interp circuit``
ranks by). Each head is measured by Wang et al.'s criteria:

- **attention** of the final token (END, the answer position) to the indirect object's first
  mention (``attn_io``) and to S2 (``attn_s2``), means over prompts;
- **copy score** (their section 3.1): the residual stream at the IO name after the first layer
  (``blocks.0.hook_resid_post``: the token embedding and MLP0, the "extended embedding"), through the
  head's OV circuit (its layer's ln1, W_V, W_O), the final norm and the unembedding: the share of
  prompts whose IO name is among the 5 largest logits (``copy_score``) or the 5 smallest
  (``negative_copy_score``);
- **path patching into the name movers' queries** (section 3.2): the head's output taken from the
  corrupted run and added *only* to the query input of the name movers (``hook_q_input``; their keys,
  values and every other head read the clean stream), the change in the logit difference (mean and a
  bootstrap interval over prompts; later layers compute on as usual from the name movers' new outputs).

The classes, in order (a head takes the first that fits): **name mover** (attn_io >= ``min_attention``
and above attn_s2, copy_score >= ``min_copy``), **negative name mover** (the same attention,
negative_copy_score >= ``min_copy``), **S-inhibition** (attn_s2 >= ``min_attention`` and above
attn_io, path patching into the name movers lowers the logit difference with its interval below
0), then the probe's pattern labels where a heads table is given (**induction**, **duplicate
token**, **previous token**: Wang et al.'s classes that the probe measures directly), else
**other**. ``classify`` -> a table; ``python -m analyses.circuits.ioi`` writes it.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import Any

import numpy as np
import pandas as pd
import torch

from analyses.circuits.attribution import node_scores
from analyses.circuits.runner import pairs_metric
from interp.display import md_table
from interp.io import OutputError, atomic_write
from interp.names import act_name
from interp.pairs import Pairs, logit_diff
from interp.stats import bootstrap_ci
from interp.view import view

__all__ = ["WANG_CLASSES", "PROBE_CLASSES", "attention_to", "copy_scores", "path_patch_queries", "classify",
           "OUTPUTS", "main"]  # fmt: skip

WANG_CLASSES = ("name mover", "negative name mover", "S-inhibition", "induction", "duplicate token",
                "previous token", "other")  # fmt: skip
PROBE_CLASSES = {"induction": "induction", "duplicate_token": "duplicate token", "previous_token": "previous token"}
OUTPUTS = ("ioi_classes.csv", "ioi_classes.md", "ioi_classes.json")


def _positions(model: Any, pairs: Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(END, the indirect object's first mention, S2) per pair."""
    from analyses.circuits.agreement import rival_positions, target_positions

    io = target_positions("ioi", pairs)
    return pairs.position.numpy().astype(int), io, rival_positions("ioi", pairs, io)


@torch.no_grad()
def attention_to(model: Any, pairs: Pairs, batch_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """(attn_io, attn_s2), each [layer, head]: the mean over prompts of END's attention to the
    indirect object's first mention and to S2 (``hook_pattern``, the clean prompts)."""
    rows, io, s2 = _positions(model, pairs)
    cfg = model.cfg
    to_io = np.zeros((cfg.n_layers, cfg.n_heads))
    to_s2 = np.zeros((cfg.n_layers, cfg.n_heads))
    for start in range(0, len(pairs), batch_size):
        sl = slice(start, start + batch_size)
        batch = pairs[sl]
        b = torch.arange(len(batch))
        r, i, s = (torch.as_tensor(x[sl]) for x in (rows, io, s2))

        def read(pattern: torch.Tensor, hook: Any, layer: int) -> None:
            row = pattern[b, :, r].double()  # [n, head, key]
            to_io[layer] += row[b, :, i].sum(0).cpu().numpy()
            to_s2[layer] += row[b, :, s].sum(0).cpu().numpy()

        hooks = [(act_name(l, "attn.hook_pattern"), functools.partial(read, layer=l)) for l in range(cfg.n_layers)]
        model.run_with_hooks(batch.clean, attention_mask=batch.attention_mask, fwd_hooks=hooks, return_type=None)
    return to_io / len(pairs), to_s2 / len(pairs)


@torch.no_grad()
def copy_scores(model: Any, pairs: Pairs, heads: list[tuple[int, int]], k: int = 5) -> pd.DataFrame:
    """Wang et al.'s copy score of each of ``heads``: per prompt, the stream after layer 0 at the IO
    name through the head's OV circuit (ln1 of its layer, W_V of its kv head, W_O), the final norm
    and the unembedding; ``copy_score``: the share of prompts whose IO token is among the ``k``
    largest logits, ``negative_copy_score``: among the ``k`` smallest."""
    _, io, _ = _positions(model, pairs)
    cache: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook: Any) -> None:
        cache["x"] = x

    model.run_with_hooks(pairs.clean, attention_mask=pairs.attention_mask,
                         fwd_hooks=[("blocks.0.hook_resid_post", keep)], return_type=None)  # fmt: skip
    b = torch.arange(len(pairs))
    x = cache["x"][b, torch.as_tensor(io)]  # [n, d_model]
    io_tokens = pairs.clean[b, torch.as_tensor(io)]
    rows = []
    cfg = model.cfg
    for layer, head in heads:
        block = model.blocks[layer]
        h = x if block.ln1 is None else block.ln1(x[:, None])[:, 0]
        v = h @ block.attn.W_V[head // cfg.group_size]
        if block.attn.b_V is not None:
            v = v + block.attn.b_V[head // cfg.group_size]
        out = v @ block.attn.W_O[head]
        if block.ln1_post is not None:
            out = block.ln1_post(out[:, None])[:, 0]
        logits = model._unembed(model.ln_final(out[:, None]) if model.ln_final is not None else out[:, None])[:, 0]
        top = logits.topk(k, dim=-1).indices
        bottom = (-logits).topk(k, dim=-1).indices
        hit, miss = (top == io_tokens[:, None]).any(-1), (bottom == io_tokens[:, None]).any(-1)
        rows.append(dict(layer=layer, head=head, copy_score=float(hit.double().mean()),
                         negative_copy_score=float(miss.double().mean())))  # fmt: skip
    return pd.DataFrame(rows)


@torch.no_grad()
def path_patch_queries(
    model: Any, pairs: Pairs, sender: tuple[int, int], receivers: list[tuple[int, int]], batch_size: int = 32
) -> np.ndarray:
    """[prompt] the change in the logit difference when ``sender``'s output (``hook_result``) is
    taken from the corrupted run and added only to the query inputs (``hook_q_input``) of
    ``receivers`` in later layers, every other reader seeing the clean stream. Receivers at or
    before the sender's layer are left out (no path); none left: zeros."""
    layer, head = sender
    later = [(l, h) for l, h in receivers if l > layer]
    out = []
    name = act_name(layer, "attn.hook_result")
    for start in range(0, len(pairs), batch_size):
        batch = pairs[start : start + batch_size]
        if not later:
            out.append(np.zeros(len(batch)))
            continue
        got: dict[str, torch.Tensor] = {}

        def keep(x: torch.Tensor, hook: Any, key: str) -> None:
            got[key] = x[:, :, head].clone()

        mask = batch.corrupted_attention_mask
        model.run_with_hooks(batch.corrupted, attention_mask=mask, return_type=None,
                             fwd_hooks=[(name, functools.partial(keep, key="corrupted"))])  # fmt: skip
        model.run_with_hooks(batch.clean, attention_mask=batch.attention_mask, return_type=None,
                             fwd_hooks=[(name, functools.partial(keep, key="clean"))])  # fmt: skip
        delta = got["corrupted"] - got["clean"]  # [batch, pos, d_model]

        def add(x: torch.Tensor, hook: Any, heads: list[int]) -> torch.Tensor:
            x = x.clone()
            x[:, :, heads] = x[:, :, heads] + delta[:, :, None]
            return x

        by_layer: dict[int, list[int]] = {}
        for l, h in later:
            by_layer.setdefault(l, []).append(h)
        hooks = [(act_name(l, "hook_q_input"), functools.partial(add, heads=hs)) for l, hs in by_layer.items()]
        clean = pairs_metric(model, batch.clean, batch, logit_diff, batch.attention_mask)
        patched = pairs_metric(model, batch.clean, batch, logit_diff, batch.attention_mask, hooks=hooks)
        out.append((patched - clean).double().cpu().numpy())
    return np.concatenate(out)


def classify(
    model: Any,
    pairs: Pairs,
    scores: pd.Series,
    labels: pd.DataFrame | None = None,
    top: int = 20,
    min_attention: float = 0.1,
    min_copy: float = 0.5,
    n_boot: int = 1000,
    seed: int = 0,
    batch_size: int = 32,
) -> pd.DataFrame:
    """Wang et al.'s class of each of the circuit's heads (the ``top`` heads by |score|; ``scores``:
    node name -> attribution score): see the module docstring. ``labels``: a probe's heads table
    (``layer``, ``head``, ``role``, ``label``) for the pattern classes; one written for another model
    (its ``model`` column) is refused (``check_labels_model``). One row per head, in rank order."""
    from analyses.circuits.nodes import parse_node
    from analyses.validation import check_labels_model

    if labels is not None:
        check_labels_model(labels, [view(model).name])
    ranked = scores[[n for n in scores.index if parse_node(n)[0] == "head"]]
    ranked = ranked.reindex(ranked.abs().sort_values(ascending=False).index)[:top]
    heads = [parse_node(n)[1:] for n in ranked.index]
    attn_io, attn_s2 = attention_to(model, pairs, batch_size)
    table = pd.DataFrame({"node": ranked.index, "layer": [l for l, _ in heads], "head": [h for _, h in heads],
                          "score": ranked.to_numpy(), "rank": np.arange(1, len(heads) + 1)})  # fmt: skip
    table["attn_io"] = [attn_io[l, h] for l, h in heads]
    table["attn_s2"] = [attn_s2[l, h] for l, h in heads]
    table = table.merge(copy_scores(model, pairs, heads), on=["layer", "head"])
    to_io = (table["attn_io"] >= min_attention) & (table["attn_io"] > table["attn_s2"])
    movers = table[to_io & (table["copy_score"] >= min_copy)]
    receivers = list(zip(movers["layer"], movers["head"]))
    table["path_effect"], table["path_low"], table["path_high"] = np.nan, np.nan, np.nan
    candidates = (table["attn_s2"] >= min_attention) & (table["attn_s2"] > table["attn_io"])
    for i in table.index[candidates]:
        effect = path_patch_queries(model, pairs, (int(table.at[i, "layer"]), int(table.at[i, "head"])), receivers,
                                    batch_size)  # fmt: skip
        lo, hi = bootstrap_ci(effect, n_boot=n_boot, seed=seed)
        table.loc[i, ["path_effect", "path_low", "path_high"]] = [effect.mean(), lo, hi]
    probe = {}
    if labels is not None and len(labels):
        lab = labels[labels["label"].astype(bool) & labels["role"].isin(list(PROBE_CLASSES))]
        for r in lab.itertuples():
            probe.setdefault((int(r.layer), int(r.head)), []).append(r.role)
    table["probe_labels"] = [", ".join(sorted(set(probe.get((l, h), [])))) for l, h in heads]
    classes = []
    for r in table.itertuples():
        io_side = r.attn_io >= min_attention and r.attn_io > r.attn_s2
        if io_side and r.copy_score >= min_copy:
            classes.append("name mover")
        elif io_side and r.negative_copy_score >= min_copy:
            classes.append("negative name mover")
        elif r.attn_s2 >= min_attention and r.attn_s2 > r.attn_io and r.path_high < 0:
            classes.append("S-inhibition")
        else:
            found = [PROBE_CLASSES[role] for role in PROBE_CLASSES if role in r.probe_labels.split(", ")]
            classes.append(found[0] if found else "other")
    table["wang_class"] = classes
    table.attrs.update(n_pairs=len(pairs), name_movers=[f"a{l}.h{h}" for l, h in receivers])
    return table


def _markdown(table: pd.DataFrame, info: dict) -> str:
    counts = table["wang_class"].value_counts().reindex(WANG_CLASSES, fill_value=0)
    return "\n".join([
        f"## IOI's circuit against Wang et al.'s classes: {info['model']}",
        "",
        f"The top {len(table)} heads by |EAP-IG| on {info['n_pairs']} solved IOI pairs; attention from END "
        f"(>= {info['params']['min_attention']}), copy score (IO among the top 5 logits of the head's OV on "
        f"the post-layer-0 stream, >= {info['params']['min_copy']}), path patching of S-inhibition candidates "
        "into the name movers' queries (mean change of the logit difference, 95% bootstrap interval).",
        "",
        "Classes: " + ", ".join(f"{c} {n}" for c, n in counts.items()) + ".",
        "",
        md_table(table),
        f"Time: {info['seconds']:.0f} s.",
        "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analyses.circuits.ioi", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--n", type=int, default=240, help="IOI pairs generated (the solved ones are used)")
    parser.add_argument("--labels", default=None, help="a probe's heads.csv for the pattern classes")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--steps", type=int, default=5, help="EAP-IG steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    try:
        labels = None
        if args.labels:
            from analyses.validation import read_labels

            labels = read_labels(args.labels)
        import models
        from analyses.circuits.tasks import circuit_task
        from interp.io import output_dir

        started = time.perf_counter()
        # the folder first (a file, another run's, files no toolkit run wrote: one line, before the work)
        with output_dir(args.out, OUTPUTS, command="python -m analyses.circuits.ioi", what="--out",
                        force=args.force) as tmp:  # fmt: skip
            model = models.load(args.model).eval()
            if labels is not None:  # another model's table: refused now, not after the attribution
                from analyses.validation import check_labels_model

                check_labels_model(labels, [view(model).name])
            ct = circuit_task(model, "ioi", n=args.n, seed=args.seed)
            scores = node_scores(model, ct.pairs, method="eap-ig", steps=args.steps, progress=True)
            table = classify(model, ct.pairs, scores.set_index("node")["score"], labels, top=args.top, seed=args.seed)
            params = dict(n=args.n, top=args.top, steps=args.steps, min_attention=0.1, min_copy=0.5,
                          labels=str(args.labels))  # fmt: skip
            info = dict(analysis="circuits.ioi", model=model.cfg.name, seed=args.seed, params=params,
                        n_pairs=len(ct.pairs), accuracy=ct.accuracy, name_movers=table.attrs["name_movers"],
                        seconds=round(time.perf_counter() - started, 1))  # fmt: skip
            atomic_write(tmp / "ioi_classes.csv", table.to_csv(index=False))
            atomic_write(tmp / "ioi_classes.md", _markdown(table, info))
            atomic_write(tmp / "ioi_classes.json", json.dumps(info, indent=2, default=str) + "\n")
    except (ValueError, OSError, OutputError) as e:
        sys.stderr.write(f"python -m analyses.circuits.ioi: {e}\n")
        return 2
    sys.stdout.write(_markdown(table, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
