"""Writes notebooks/05_positional_encodings.ipynb (run: python notebooks/make_05.py)."""

from nbformat.v4 import new_code_cell, new_markdown_cell
from nbwrite import write

cells = [
    new_markdown_cell(
        """# 05 · Positional encodings on trial

Attention alone is order-blind; position is bolted on. The claims: learned absolute positions do
not extrapolate past the trained context, RoPE and ALiBi do (their scores depend on relative
position only). Here the same small causal model (2 layers, d_model 128, 4 heads, context 128) was
trained once per scheme on the same English text, steps and seed (`analyses/positional.py`,
budget `full`). This notebook loads those checkpoints from `checkpoints/positional/` (or, if they
are missing, trains the seconds-long `quick` versions) and measures them."""
    ),
    new_code_cell(
        """from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

import models
from analyses import positional as P
from models.training import heldout_windows

torch.set_num_threads(1)
ROOT = Path(models.__file__).resolve().parents[1]
CKPT = ROOT / "checkpoints" / "positional"
budget = P.BUDGETS["full"]
trained = {s: P.load_scheme(CKPT / s, budget) for s in P.SCHEMES}
if all(v is not None for v in trained.values()):
    # models.load reads the toolkit checkpoint: config, safetensors weights, BPE tokenizer
    study = {s: models.load(str(CKPT / s)) for s in P.SCHEMES}
else:  # no full checkpoints here: train the quick versions (seconds each)
    budget = P.BUDGETS["quick"]
    data = P.prepare_data(budget)
    study = {s: P.train_scheme(s, budget, data, progress=False)[0] for s in P.SCHEMES}
print("budget:", budget.name)
for s, m in study.items():
    print(f"{s:<11}", m)"""
    ),
    new_markdown_cell(
        """## Held-out loss by position, out to 4x the training context

Learned absolute positions have no embedding past `n_ctx`: there is nothing to look up, so their
curve stops at the dashed line (n/a, not a number). The others run with `allow_beyond_ctx=True`."""
    ),
    new_code_cell(
        """tok = next(iter(study.values())).tokenizer
heldout = P.heldout_data(tok, budget)
n_ctx = budget.n_ctx
windows = heldout_windows(heldout, 4 * n_ctx, 24)
curves = []
for s, m in study.items():
    c = P.loss_by_position(m, windows)
    curves.append(pd.DataFrame({"scheme": s, "position": np.arange(c.size), "loss": c}))
curves = pd.concat(curves).dropna()
curves["bin"] = curves.position // 16 * 16 + 8
binned = curves.groupby(["scheme", "bin"], as_index=False).loss.mean()
ax = sns.lineplot(data=binned, x="bin", y="loss", hue="scheme", hue_order=list(P.SCHEMES))
ax.axvline(n_ctx, color="grey", ls="--")
ax.set(xlabel="position (tokens)", ylabel="next-token loss (nats)", title="which schemes extrapolate")
plt.show()
table = binned.assign(region=np.where(binned.bin < n_ctx, "inside context", "beyond (1x-4x)"))
table.pivot_table(index="scheme", columns="region", values="loss").reindex(list(P.SCHEMES)).round(3)"""
    ),
    new_markdown_cell(
        """## The relative-position check, and how much order matters

`shift_invariance`: layer-0 attention scores for the same tokens at the same distance, at two
places of a periodic sequence. RoPE, ALiBi and no-position give equal scores (float rounding);
learned and sinusoidal absolute embeddings do not. `shuffle_increase`: held-out loss when each
window's tokens are shuffled, minus the loss in order."""
    ),
    new_code_cell(
        """rows = []
short = heldout_windows(heldout, n_ctx, 64)
for s, m in study.items():
    loss, shuffled = P.shuffled_loss(m, short)
    rows.append({"scheme": s, "heldout_loss": loss, "shuffle_increase": shuffled - loss,
                 "shift_deviation_L0": P.shift_invariance(m, 0)})
pd.DataFrame(rows).set_index("scheme").round(4)"""
    ),
    new_markdown_cell(
        """## What the heads do

Random tokens followed by the same tokens again: a previous-token head attends from i to i-1; an
induction head attends from i (second copy) to the token that followed the earlier copy of token i.
The loss on the repeated half falls below the first half's only if the model copies in context."""
    ),
    new_code_cell(
        """head_tables, summary = [], []
for s, m in study.items():
    heads, rep = P.repeated_sequence_scores(m, batch=16)
    head_tables.append(heads.assign(scheme=s))
    summary.append({"scheme": s, **rep})
heads = pd.concat(head_tables)
heads["head_id"] = "L" + heads["layer"].astype(str) + "H" + heads["head"].astype(str)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
for ax, col in zip(axes, ["previous_token", "induction"]):
    grid = heads.pivot(index="scheme", columns="head_id", values=col).reindex(list(P.SCHEMES))
    sns.heatmap(grid, vmin=0, vmax=1, annot=True, fmt=".2f", cmap="viridis", cbar=False, ax=ax)
    ax.set_title(col)
plt.tight_layout()
plt.show()
pd.DataFrame(summary).set_index("scheme").round(3)"""
    ),
    new_code_cell(
        """# the strongest previous-token head of the learned-position model, on a real sentence
m = study["learned"]
best = heads[heads.scheme == "learned"].sort_values("previous_token").iloc[-1]
layer, head = int(best["layer"]), int(best["head"])
batch = m.to_words("The cat sleeps on the mat because it is tired.")
_, cache = m.run_with_cache(batch.input_ids, names_filter=lambda n: n.endswith("hook_pattern"))
pat = cache[f"blocks.{layer}.attn.hook_pattern"][0, head]
labels = [t.replace("Ġ", "_") for t in batch.tokens[0]]
ax = sns.heatmap(pat.numpy(), xticklabels=labels, yticklabels=labels, cmap="Blues", vmin=0, vmax=1)
ax.set_title(f"learned positions, L{layer}H{head} (previous-token score {best['previous_token']:.2f})")
plt.show()"""
    ),
    new_markdown_cell(
        """Read the numbers with the budget in mind: a few hundred CPU steps buy bigram-level models.
`docs/positional.md` reports the full run, its model cards and the benchmark."""
    ),
]

write(cells, "05_positional_encodings.ipynb")
