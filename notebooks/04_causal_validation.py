# %% [markdown]
# # 04 Causal validation: does a head labelled by its pattern do that job?
#
# An attention pattern shows where a head looks, not what the model uses it for. Here every labelled head is
# **ablated** (its `hook_z` replaced by its mean) and a behaviour tied to its role is measured; the effect is compared
# with ablating random heads. Verdicts: `validated`, `no effect` (labelled by attention; the effect's interval lies
# inside +-min_effect), `inconclusive (under-powered)` (an interval too wide to say either), `inconclusive`.

# %%
import os

import pandas as pd
import torch
from IPython.display import Markdown

import models
from analyses import validation as V
from analyses.validation.report import report_markdown
from interp import interventions as iv

torch.set_num_threads(1)  # small batches: one thread is fastest on a shared CPU
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)
SMOKE = os.environ.get("NOTEBOOKS_SMOKE") == "1"  # tests/test_notebooks.py runs every cell on less data
N = 8 if SMOKE else 20  # prompts per role on MiniLM

# %% [markdown]
# ## 1. A planted model: the only path versus a decoy
#
# Head A (0, 0) attends to the previous token and writes its identity where the unembedding reads it; head B (0, 1)
# has exactly A's attention pattern but `W_O = 0`. Both would get the label `previous_token` from their patterns. Only
# A should survive the causal test.

# %%
planted, heads = V.planted_model(seed=0)
prompts = V.planted_prompts(n=12, seed=0)
labels = pd.DataFrame(
    [
        dict(layer=0, head=0, role="previous_token", score=1.0, label=True),
        dict(layer=0, head=1, role="previous_token", score=1.0, label=True),
    ]
)
res = V.run(planted, labels, prompts=prompts, seed=0)
Markdown(report_markdown(res, "two hand-set labels"))  # the validation.md `interp validate` writes

# %%
assert res.table.verdict.tolist() == ["validated", "no effect"]
res.effects.sort_values("effect", ascending=False).head(5)[["layer", "head", "effect", "ci_low", "ci_high"]]

# %% [markdown]
# ## 2. The interventions themselves
#
# Zero-, mean- and resample-ablation of any set of heads, and activation patching (clean `z` into a corrupted run)
# through `transformer_lens.patching`.

# %%
f = V.metric_functions(prompts)["loss"]
clean = -f(planted(prompts.tokens)).mean().item()
for kind in iv.ABLATIONS:
    out = iv.run_ablated(planted, prompts.tokens, [heads["A"]], kind=kind, groups=prompts.family)
    print(f"{kind:9s} ablation of A: loss {clean:.3f} -> {-f(out).mean().item():.3f}")
out = iv.run_ablated(planted, prompts.tokens, [heads["B"]], kind="zero")
print(f"zero ablation of B: loss {clean:.3f} -> {-f(out).mean().item():.3f}")

# %% [markdown]
# ## 3. A real encoder: MiniLM
#
# Labels here come from patterns alone (`pattern_labels`: previous-token heads on repeated random tokens); the
# behaviour is a linear probe that reads, from a noun's final state, which determiner preceded it (`prev_word_probe`).
# The CLI does the same with the head-probing report's labels: `interp validate --model minilm --out DIR`.

# %%
minilm = models.load("minilm").eval()
lab = V.pattern_labels(minilm, top=3)
lab = lab[lab.role == "previous_token"]
mres = V.run(minilm, lab, n=N, seed=0, n_null=10, n_layer_null=1, n_boot=300)
mres.table[["layer", "head", "role", "metric", "effect", "null_mean", "null_std", "p_value", "q_value", "verdict"]]

# %%
print(mres.info["clean_accuracy"])
mres.unlabelled.head()

# %% [markdown]
# ## 4. Activation patching on SmolLM2, TransformerLens style
#
# An indirect-object prompt and its corruption (the repeated name swapped): the metric is the logit difference
# " Mary" - " John" at the last token. `iv.patching_table` runs the corrupted prompt once per head with that head's
# `hook_z` taken from the clean run, and returns a `[layer, head]` table normalised as
# `(patched - corrupted) / (clean - corrupted)` (1: the head alone restores the clean answer). It warns when the
# clean - corrupted gap is too small to divide by (`iv.MIN_GAP`). `transformer_lens.patching` takes our model
# directly and gives the same numbers.

# %%
import transformer_lens.patching as tl_patching  # noqa: E402

lm = models.load("smollm2")
clean_ids = lm.to_tokens("When Mary and John went to the store, John gave a drink to")
corrupt_ids = lm.to_tokens("When Mary and John went to the store, Mary gave a drink to")
mary, john = lm.to_single_token(" Mary"), lm.to_single_token(" John")


def logit_diff(logits):
    return (logits[:, -1, mary] - logits[:, -1, john]).mean()


layers = range(12, 15) if SMOKE else range(8, 20)
heads_to_patch = [(layer, head) for layer in layers for head in range(lm.cfg.n_heads)]
table = iv.patching_table(lm, clean_ids, corrupt_ids, logit_diff, heads=heads_to_patch)
iv.plot_head_table(table.loc[list(layers)], title="patched logit difference, normalised")
table.loc[list(layers)].round(2)

# %%
with torch.no_grad():
    _, clean_cache = lm.run_with_cache(clean_ids)
    theirs = tl_patching.generic_activation_patch(
        lm,
        corrupt_ids,
        clean_cache,
        logit_diff,
        patch_setter=tl_patching.layer_head_vector_patch_setter,
        activation_name="z",
        index_df=pd.DataFrame(heads_to_patch[:4], columns=["layer", "head"]),
    )
    gap = (logit_diff(lm(clean_ids)) - logit_diff(lm(corrupt_ids))).item()
    base = logit_diff(lm(corrupt_ids)).item()
ours = [table.loc[layer, head] for layer, head in heads_to_patch[:4]]
print("ours (normalised):           ", [round(float(x), 4) for x in ours])
print("transformer_lens (same, norm):", [round((float(t) - base) / gap, 4) for t in theirs])
