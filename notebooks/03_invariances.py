# %% [markdown]
# # 03 Invariances: each claim, its measurement on real weights, its figure
#
# Every table below comes from `analyses.invariance` and has the columns `model, check, quantity, value, tolerance,
# expected, passed, baseline`. `expected = holds` is an invariance (value within tolerance, and the guard `baseline` —
# the same metric for a different input — far above it); `expected = breaks` is a negative control. The loaded models
# are never modified: every edit is made on a `copy.deepcopy`.

# %%
import matplotlib.pyplot as plt
import pandas as pd
import torch

import models
from analyses.invariance import conditioning as cond
from analyses.invariance import interpretation as interp
from analyses.invariance import permutation as perm
from analyses.invariance import position as pos
from analyses.invariance import rotation as rot
from analyses.invariance import scale
from analyses.invariance.common import double_copy, model_tokens

pd.set_option("display.max_colwidth", 90)
torch.set_num_threads(1)  # the machines that run this are shared; oversubscribed threads run ~10x slower
COLS = ["quantity", "dtype", "value", "tolerance", "baseline", "expected", "passed"]
minilm = models.load("minilm")
snapshot = {k: v.clone() for k, v in minilm.state_dict().items()}
tokens = model_tokens(minilm, n_tokens=14)
minilm64 = double_copy(minilm)
minilm

# %% [markdown]
# ## 1. Attention alone is order-blind
# One attention layer, fed its own input from a real run: permuting the input permutes the output (fp32 round-off),
# unless a causal mask is applied.

# %%
perm.layer_permutation(minilm, tokens, model64=minilm64)[COLS]

# %% [markdown]
# The whole encoder with its position embeddings zeroed (`hook_pos_embed`) is equivariant: 'dog bites man' and 'man
# bites dog' give the same token vectors, permuted. With positions they differ.

# %%
perm.model_permutation(minilm, tokens, model64=minilm64)[COLS + ["detail"]]

# %% [markdown]
# Per head: shuffle the tokens, undo the shuffle on the pattern, and measure the mean total-variation distance to the
# original pattern (the attention mass that had to move; 0 = content only). Positional heads stand out.

# %%
heads = perm.head_position_sensitivity(minilm, tokens, n_perms=3, model64=minilm64)
perm.tv_heatmap(heads)
plt.show()
heads.sort_values("tv", ascending=False).head(5)

# %% [markdown]
# ## 2. Rotations: W_Q R, W_K R and W_V R, R^T W_O change nothing
# Every head of every layer is edited at once; scores, patterns and the final hidden state are compared with the
# original model in fp64. Negative controls must break.

# %%
rot.model_rotation_checks(minilm, tokens, model64=minilm64)[COLS]

# %% [markdown]
# MiniLM's projections have biases: a query is x W_Q + b_Q, a key x W_K + b_K. The scores keep only if the biases
# rotate with their weights (b_Q R, b_K R), which `rot.transform_heads` does. Rotating W_Q and W_K alone, keeping
# b_Q and b_K, changes them: the largest score change over the 6 layers, relative to the largest score, both ways.

# %%
from analyses.invariance.common import generator, relerr

spec = rot.qk_orthogonal(minilm.cfg, generator(0))
with_biases = rot.transform_heads(minilm, spec)  # W_Q R, b_Q R, W_K R, b_K R
without_biases = rot.transform_heads(minilm, spec)
for block, original in zip(without_biases.blocks, minilm.blocks):  # put the original b_Q, b_K back
    block.attn.b_Q, block.attn.b_K = original.attn.b_Q.detach().clone(), original.attn.b_K.detach().clone()
reference = rot.observe(minilm, tokens)["scores"]
for what, edited in [("biases rotated too", with_biases), ("biases kept", without_biases)]:
    change = max(relerr(a, b) for a, b in zip(rot.observe(edited, tokens)["scores"], reference))
    print(f"W_Q R, W_K R, {what:18s} relative score change {change:.1e}")

# %% [markdown]
# Any invertible A with W_Q A and W_K A^-T keeps the scores; the round-off grows linearly with cond(A) (relative error
# about u * cond(A)), always inside the a-priori bound.

# %%
sweep = cond.conditioning_sweep(minilm, tokens, conds=(1, 1e2, 1e4, 1e6), layers=[0, 3, 5])
cond.conditioning_figure(sweep)
plt.show()
sweep

# %% [markdown]
# What can be interpreted: the factors change under rotation, their products and spectra do not (TransformerLens
# `FactoredMatrix`).

# %%
interp.interpretation_table(minilm, layer=2, head=0, tokens=tokens)

# %% [markdown]
# ## 3. RoPE and grouped-query attention (SmolLM2)
# A general orthogonal R does not commute with the rotary matrices, so it changes the model; rotations inside each
# rotary plane do not. Each key/value head's rotation must be shared by its whole group.

# %%
smollm2 = models.load("smollm2")
stoks = model_tokens(smollm2, n_tokens=8)
print(models.rope_planes(smollm2.cfg)[:3], "...")
rot.model_rotation_checks(smollm2, stoks, fp64=False)[COLS]

# %% [markdown]
# ## 4. Relative position
# Shift every position by s: RoPE (SmolLM2 itself) and ALiBi (a small model) scores do not change beyond the angle
# round-off, which grows with position; learned absolute positions (MiniLM) do.

# %%
rel_s, rows_s = pos.relative_position_checks(smollm2, shifts=(1, 100, 1000, 4000))
rel_m, rows_m = pos.relative_position_checks(minilm, shifts=(1, 100))
pd.concat([rows_s, rows_m[rows_m.quantity.str.startswith("learned")]])[COLS]

# %% [markdown]
# ## 5. The 1/sqrt(d) scale
# Random Gaussian q, k and real ones (MiniLM layer 3, heads concatenated): without the scale, entropy and gradients
# collapse as d grows.

# %%
sw = scale.scale_sweep(minilm)
scale.scale_figure(sw)
plt.show()
scale.scale_rows("minilm", sw)[["quantity", "value", "tolerance", "passed", "detail"]]

# %% [markdown]
# ## 6. The models were never changed

# %%
assert all(torch.equal(v, snapshot[k]) for k, v in minilm.state_dict().items())
"unchanged"
