# %% [markdown]
# # 05 · Positional encodings on trial
#
# Two meanings of "seed" below. *The seed documents* are the project's source texts (in Japanese, in
# `../shared/seeds/` beside the repository): the claims this notebook puts on trial come from them, and
# "what the seeds say" quotes them. *Random seeds* (`seed=0`, "three seeds") are the integers that fix a
# run's random initialisation and data: a result is repeated over several of them.
#
# The seed documents say: attention alone is order-blind (shuffle the words, same answer); learned absolute
# positions do not extrapolate past the trained length; RoPE and ALiBi depend on distance only. The
# second-round study (`interp positional --budget full --jobs 2`, see
# `docs/positional.md`) tests each claim on a task that isolates it, over every scheme and three
# random seeds, and trains one model per scheme on natural text. This notebook shows the study's tables
# (if the full run is in `docs/positional_study/`), then re-runs small versions of each experiment
# live: seconds on a CPU.

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

import models
from analyses import positional as P
from analyses.data.generated import random_repeated_tokens
from analyses.positional import runs as U
from analyses.positional import synthetic as S
from analyses.positional import tasks as T
from models.training import heldout_windows

torch.set_num_threads(1)
ROOT = Path(models.__file__).resolve().parents[1]
STUDY = ROOT / "docs" / "positional_study"
claims = STUDY / "claims.md"
print(claims.read_text() if claims.exists() else "no full study in docs/positional_study yet")

# %% [markdown]
# ## Order: "dog bites man"
#
# The order task: fillers with one `A` and one `B`, then a query; the answer is whether A came
# first. The multiset of tokens is the same either way. A bidirectional model without positions is
# permutation-equivariant, so a sequence and its A/B-swapped twin get the same answer: exactly half
# right on a balanced set, whatever the weights. A causal model is not: the mask lets B see A only
# when A came first. The planted model below has **no positional encoding** and hand-set weights
# that use exactly that leak.

# %%
task = T.OrderTask()
tokens, targets = task.sample(1000, torch.Generator().manual_seed(0), balanced=True)
for attention in ("causal", "bidirectional"):
    planted = T.planted_order_model(task, attention)
    print(f"planted, no positions, {attention:<13} accuracy {task.accuracy(planted, tokens, targets):.3f}")

quick = U.study_budget("quick")
rows = []
for attention in ("bidirectional", "causal"):
    for scheme in ("none", "learned", "alibi"):
        run = S.train_task(quick.order, scheme, attention, seed=0)
        rows.append({"attention": attention, "scheme": scheme, **S.order_measure(quick.order.task, run.model)})
pd.DataFrame(rows).pivot(index="scheme", columns="attention", values="accuracy").round(3)

# %% [markdown]
# ## Length extrapolation: copy the token k back
#
# Trained on sequences of length L, tested out to 8 L (the quick budget here; the study's own
# figure is `docs/positional_study/extrapolation.png`). The learned model's position table has 8 L
# rows, but training sequences have L tokens, so rows L..8L never get a gradient (and are kept out of
# weight decay): past L it reads position vectors that are still at their random initialisation,
# which is the seed documents' claim about untrained positions, measured.

# %%
spec = quick.copy_back
frames = []
for scheme in P.SCHEMES:
    model = S.train_task(spec, scheme, "causal", seed=0).model
    row, curve = S.copy_measure(spec, model)
    if scheme == "learned":
        print("learned: rows past L moved by", S.untrained_rows_change(spec, model, seed=0), "from initialisation")
    frames.append(pd.DataFrame({"scheme": scheme, "position": np.arange(curve.size), "accuracy": curve}))
curves = pd.concat(frames).dropna()
ax = sns.lineplot(data=curves, x="position", y="accuracy", hue="scheme")
ax.axvline(spec.task.length, color="grey", ls="--")
ax.set_title(f"copy the token {spec.task.k} back (quick budget: {spec.train.steps} steps)")
plt.show()

# %% [markdown]
# ## Induction heads
#
# A 2-layer attention-only model on random tokens with one segment repeated at a random offset.
# The study logs, every few steps, the loss on the second copy and the best head's induction score
# (`study.head_scores` on random tokens followed by the same tokens); the step where they cross a
# threshold is when the induction head formed. The planted model shows what the finished circuit
# does: a previous-token head in layer 0, an induction head in layer 1.

# %%
itask = T.InductionTask(length=32, segment=8, d_vocab=32, distinct=True)
planted = T.planted_induction_model(itask)
probe = random_repeated_tokens(8, itask.length // 2, itask.d_vocab, seed=0, distinct=True)
_, cache = planted.run_with_cache(probe, names_filter=lambda n: n.endswith("hook_pattern"))
heads = P.head_scores({l: cache[f"blocks.{l}.attn.hook_pattern"] for l in range(2)}, itask.length // 2)
print(heads.round(3).to_string(index=False))
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for layer, ax in enumerate(axes):
    sns.heatmap(
        cache[f"blocks.{layer}.attn.hook_pattern"][0, 0].numpy(), cmap="Blues", vmin=0, vmax=1, ax=ax, cbar=False
    )
    ax.set_title(["layer 0: previous token", "layer 1: induction"][layer])
plt.show()

# %% [markdown]
# ## Natural text
#
# One model per scheme on the BoolQ passages. With the study's checkpoints in
# `checkpoints/positional/` (written by the full run) this loads them; otherwise it trains the
# quick versions (seconds). Held-out loss by position, out to 4x the training context.

# %%
CKPT = ROOT / "checkpoints" / "positional"
budget = P.BUDGETS["full"]
trained = {s: P.load_scheme(CKPT / s, budget) for s in P.SCHEMES}
if all(v is not None for v in trained.values()):
    study = {s: models.load(str(CKPT / s)) for s in P.SCHEMES}
else:
    budget = P.BUDGETS["quick"]
    data = P.prepare_data(budget)
    study = {s: P.train_scheme(s, budget, data, progress=False)[0] for s in P.SCHEMES}
print("budget:", budget.name)
tok = next(iter(study.values())).tokenizer
heldout = P.heldout_data(tok, budget)
windows = heldout_windows(heldout, 4 * budget.n_ctx, 16)
frames = []
for s, m in study.items():
    c = P.loss_by_position(m, windows)
    frames.append(pd.DataFrame({"scheme": s, "position": np.arange(c.size), "loss": c}))
curves = pd.concat(frames).dropna()
curves["bin"] = curves.position // 16 * 16 + 8
binned = curves.groupby(["scheme", "bin"], as_index=False).loss.mean()
ax = sns.lineplot(data=binned, x="bin", y="loss", hue="scheme", hue_order=list(P.SCHEMES))
ax.axvline(budget.n_ctx, color="grey", ls="--")
ax.set(xlabel="position (tokens)", ylabel="next-token loss (nats)")
plt.show()

# %% [markdown]
# `docs/positional.md` has every claim's table with the spread over seeds, the natural-text
# conditions and whether they were met, the model cards, and the CPU time the study took.
