# %% [markdown]
# # 01 - A tour of the hooks
#
# Load a real trained model, list its hook points with shapes, cache a run, plot one head's attention pattern, and
# zero one head to see what changes. Everything runs offline on the CPU.

# %%
import matplotlib.pyplot as plt
import seaborn as sns
import torch

import models
from analyses.report.tour import hook_shapes

torch.set_grad_enabled(False)
model = models.load("minilm")  # sentence-transformers/all-MiniLM-L6-v2, shipped in a PyPI package
model

# %% [markdown]
# ## Every hook point, with its shape on one sentence

# %%
text = "The cat sleeps because it is tired."
table = hook_shapes(model, text)
print(len(table), "hook points")
table[table.hook.str.startswith("blocks.0.") | ~table.hook.str.startswith("blocks.")]

# %% [markdown]
# ## Cache a run
#
# `run_with_cache` works as in TransformerLens; a names filter keeps only what you need.

# %%
batch = model.to_words([text])  # tokens + token-to-word alignment (what the analyses use)
hidden, cache = model.run_with_cache(
    batch.input_ids,
    attention_mask=batch.attention_mask,
    names_filter=lambda n: n.endswith(("hook_pattern", "hook_attn_scores")),
)
scores, pattern = cache["blocks.2.attn.hook_attn_scores"], cache["blocks.2.attn.hook_pattern"]
print(batch.tokens[0])
print("softmax(scores) == pattern:", torch.allclose(scores.softmax(-1), pattern))
print("rows sum to one:", torch.allclose(pattern.sum(-1), torch.ones(())))

# %% [markdown]
# ## One head's pattern

# %%
layer, head = 2, 5
tokens = batch.tokens[0]
ax = sns.heatmap(
    cache[f"blocks.{layer}.attn.hook_pattern"][0, head],
    xticklabels=tokens,
    yticklabels=tokens,
    cmap="viridis",
    vmin=0,
    vmax=1,
    square=True,
)
ax.set(xlabel="key", ylabel="query", title=f"MiniLM layer {layer} head {head}")
plt.show()


# %% [markdown]
# ## Zero one head and see what changes
#
# A hook on `hook_z` sets one head's output to zero. The hook lives only for this call.


# %%
def zero_head(z, hook, head=head):
    z[:, :, head] = 0.0
    return z


ablated = model.run_with_hooks(
    batch.input_ids, attention_mask=batch.attention_mask, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero_head)]
)
change = (ablated - hidden).norm(dim=-1)[0] / hidden.norm(dim=-1)[0]
for tok, c in zip(tokens, change.tolist()):
    print(f"{tok:>10s}  relative change of the final representation: {c:.3f}")
assert not any(h.fwd_hooks for h in model.hook_dict.values())  # nothing left attached

# %% [markdown]
# ## The causal LM: the masked triangle, and a head's effect on the next token
#
# SmolLM2-135M (Llama architecture: RoPE, RMSNorm, SwiGLU, grouped-query attention).

# %%
lm = models.load("smollm2")
prompt = "The keys to the cabinet"
b = lm.to_words([prompt])
logits, c = lm.run_with_cache(b.input_ids, names_filter="blocks.3.attn.hook_pattern")
p = c["blocks.3.attn.hook_pattern"][0, 0]
print("upper triangle is exactly zero:", bool((p.triu(1) == 0).all()))
ax = sns.heatmap(p, xticklabels=b.tokens[0], yticklabels=b.tokens[0], cmap="viridis", vmin=0, vmax=1, square=True)
ax.set(title="SmolLM2 layer 3 head 0 (causal)")
plt.show()
are, is_ = lm.tokenizer.hf.encode(" are")[0], lm.tokenizer.hf.encode(" is")[0]
print("logit(are) - logit(is):", (logits[0, -1, are] - logits[0, -1, is_]).item())

# %% [markdown]
# ## Attention by hand
#
# A head's pattern is softmax(q k^T / sqrt(d_head) + mask): the mask is 0 where a query may look and -inf where it
# may not (the causal LM's upper triangle; MiniLM masks nothing on one unpadded sentence). Two things to mind:
# - RoPE rotates q and k *after* `hook_q`/`hook_k`: the scores read the rotated ones, `hook_rot_q`/`hook_rot_k`
#   (on MiniLM, which has no RoPE, these equal `hook_q`/`hook_k`).
# - Grouped-query attention: SmolLM2 has 9 query heads and 3 key/value heads; query head h reads key head
#   h // group_size, so each key head is repeated group_size times (`repeat_interleave`).


# %%
def pattern_by_hand(model, ids, layer, q_hook, k_hook, **kwargs):
    """softmax(q k^T / sqrt(d_head) + mask) for every head of one layer, and the model's own pattern."""
    name = f"blocks.{layer}.attn."
    _, c = model.run_with_cache(ids, names_filter=lambda n: n.startswith(name), **kwargs)
    q, k = c[name + q_hook][0], c[name + k_hook][0]  # [pos, head, d_head], [pos, kv_head, d_head]
    k = k.repeat_interleave(model.cfg.n_heads // k.shape[1], dim=1)  # key head g serves query heads g*G .. g*G+G-1
    scores = torch.einsum("qhd,khd->hqk", q, k) / model.cfg.d_head**0.5
    n = scores.shape[-1]
    mask = torch.full((n, n), float("-inf")).triu(1) if model.cfg.is_causal else torch.zeros(n, n)
    return (scores + mask).softmax(-1), c[name + "hook_pattern"][0]


for label, m, ids, q_hook, k_hook, kw in [
    ("SmolLM2 layer 3, rotated q, k", lm, b.input_ids, "hook_rot_q", "hook_rot_k", {}),
    ("SmolLM2 layer 3, q, k before RoPE", lm, b.input_ids, "hook_q", "hook_k", {}),
    ("MiniLM layer 2, q, k", model, batch.input_ids, "hook_q", "hook_k", {"attention_mask": batch.attention_mask}),
]:
    mine, theirs = pattern_by_hand(m, ids, 2 if m is model else 3, q_hook, k_hook, **kw)
    diff = (mine - theirs).abs().max().item()
    print(f"{label:36s} max |by hand - hook_pattern| = {diff:.1e}")
    if "before RoPE" in label:
        assert diff > 0.01, diff  # without the rotation the scores are not the model's
    else:
        assert diff < 1e-5, diff

# %% [markdown]
# ## Coming from TransformerLens
#
# TransformerLens code runs unchanged: `to_tokens` returns a `[batch, pos]` tensor, `run_with_cache` returns
# TransformerLens's own `ActivationCache`, the stacked weights and `FactoredMatrix` circuits are there,
# `transformer_lens.patching` takes the model, and `generate` continues text (greedy output equals Hugging Face's
# token for token). On SmolLM2 a cached run's numbers (the eager attention path, which materialises the patterns) are
# bitwise those of TransformerLens's `TransformerBridge` on the same tokens; a plain `lm(tokens)` runs the fused SDPA
# path (bitwise Hugging Face's default SDPA attention, ~1e-5 from eager), and `lm(tokens, exact=True)` the eager one.
# One default differs: our `to_tokens` adds no BOS to SmolLM2 text (the bridge prepends `<|im_start|>`, SmolLM2's
# chat-turn marker); pass `prepend_bos=True` for the bridge's tokens.

# %%
prompt = "When Mary and John went to the store, John gave a drink to"
tokens = lm.to_tokens(prompt)  # TransformerLens: a LongTensor [1, pos]
print(tokens.shape, lm.to_str_tokens(prompt)[:6])
logits, cache = lm.run_with_cache(tokens)  # a transformer_lens.ActivationCache
print(type(cache).__mro__[1], cache["pattern", 3].shape)
mary, john = lm.to_single_token(" Mary"), lm.to_single_token(" John")
print("logit diff Mary - John:", (logits[0, -1, mary] - logits[0, -1, john]).item())

# %% [markdown]
# Direct logit attribution: each head's output at the last position, divided by the final norm's scale, dotted with
# the Mary - John unembedding direction (TransformerLens's own `stack_head_results` and `logit_attrs`).

# %%
heads, labels = cache.stack_head_results(layer=-1, return_labels=True)
dla = cache.logit_attrs(heads[:, :, -1], torch.tensor([mary]), torch.tensor([john]), pos_slice=-1)[:, 0]
top = dla.abs().argsort(descending=True)[:5]
for i in top.tolist():
    print(f"{labels[i]:>6s}  {dla[i].item():+.3f}")
layer, head = (int(x) for x in labels[top[0]][1:].split("H"))

# %% [markdown]
# The same head's circuits as `FactoredMatrix` (`lm.OV`, `lm.QK` are `[layer, head, d_model, d_model]`, never
# multiplied out; under grouped-query attention `lm.W_K` repeats each key/value head for the query heads it serves,
# `lm._W_K` is grouped), and activation patching with `transformer_lens.patching` on the model itself: the head's `z`
# from the clean prompt put into a corrupted one.

# %%
import pandas as pd
from transformer_lens import patching

ov = lm.OV[layer, head]
print(type(ov).__name__, tuple(ov.shape), "inner dim", ov.mdim, "norm", round(ov.norm().item(), 2))
print("W_Q", tuple(lm.W_Q.shape), "W_K", tuple(lm.W_K.shape), "_W_K", tuple(lm._W_K.shape))
corrupted = lm.to_tokens("When Mary and John went to the store, Mary gave a drink to")


def metric(lg):
    return (lg[:, -1, mary] - lg[:, -1, john]).mean()


picked = pd.DataFrame([(layer, head), (layer, (head + 1) % lm.cfg.n_heads)], columns=["layer", "head"])
patched = patching.generic_activation_patch(
    lm,
    corrupted,
    cache,
    metric,
    activation_name="z",
    patch_setter=patching.layer_head_vector_patch_setter,
    index_df=picked,
)
print("corrupted:", metric(lm(corrupted)).item(), " patched heads:", patched.tolist())

# %%
print(lm.generate("The keys to the cabinet", max_new_tokens=12, do_sample=False))
