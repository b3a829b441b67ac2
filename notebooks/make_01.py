"""Writes notebooks/01_hooks_tour.ipynb (run: python notebooks/make_01.py)."""

import nbformat as nbf
from nbwrite import write

cells = [
    nbf.v4.new_markdown_cell(
        "# 01 - A tour of the hooks\n\n"
        "Load a real trained model, list its hook points with shapes, cache a run, plot one head's "
        "attention pattern, and zero one head to see what changes. Everything runs offline on the CPU."
    ),
    nbf.v4.new_code_cell(
        "import torch, seaborn as sns, matplotlib.pyplot as plt\n"
        "import models\n"
        "from analyses.report.tour import hook_shapes\n"
        "torch.set_grad_enabled(False)\n"
        "model = models.load('minilm')   # sentence-transformers/all-MiniLM-L6-v2, shipped in a PyPI package\n"
        "model"
    ),
    nbf.v4.new_markdown_cell("## Every hook point, with its shape on one sentence"),
    nbf.v4.new_code_cell(
        "text = 'The cat sleeps because it is tired.'\n"
        "table = hook_shapes(model, text)\n"
        "print(len(table), 'hook points')\n"
        "table[table.hook.str.startswith('blocks.0.') | ~table.hook.str.startswith('blocks.')]"
    ),
    nbf.v4.new_markdown_cell(
        "## Cache a run\n\n`run_with_cache` works as in TransformerLens; a names filter keeps only what you need."
    ),
    nbf.v4.new_code_cell(
        "batch = model.to_words([text])   # tokens + token-to-word alignment (what the analyses use)\n"
        "hidden, cache = model.run_with_cache(batch.input_ids, attention_mask=batch.attention_mask,\n"
        "                                     names_filter=lambda n: n.endswith(('hook_pattern', 'hook_attn_scores')))\n"
        "scores, pattern = cache['blocks.2.attn.hook_attn_scores'], cache['blocks.2.attn.hook_pattern']\n"
        "print(batch.tokens[0])\n"
        "print('softmax(scores) == pattern:', torch.allclose(scores.softmax(-1), pattern))\n"
        "print('rows sum to one:', torch.allclose(pattern.sum(-1), torch.ones(())))"
    ),
    nbf.v4.new_markdown_cell("## One head's pattern"),
    nbf.v4.new_code_cell(
        "layer, head = 2, 5\n"
        "tokens = batch.tokens[0]\n"
        "ax = sns.heatmap(cache[f'blocks.{layer}.attn.hook_pattern'][0, head], xticklabels=tokens, yticklabels=tokens,\n"
        "                 cmap='viridis', vmin=0, vmax=1, square=True)\n"
        "ax.set(xlabel='key', ylabel='query', title=f'MiniLM layer {layer} head {head}')\n"
        "plt.show()"
    ),
    nbf.v4.new_markdown_cell(
        "## Zero one head and see what changes\n\n"
        "A hook on `hook_z` sets one head's output to zero. The hook lives only for this call."
    ),
    nbf.v4.new_code_cell(
        "def zero_head(z, hook, head=head):\n"
        "    z[:, :, head] = 0.0\n"
        "    return z\n"
        "ablated = model.run_with_hooks(batch.input_ids, attention_mask=batch.attention_mask,\n"
        "                               fwd_hooks=[(f'blocks.{layer}.attn.hook_z', zero_head)])\n"
        "change = (ablated - hidden).norm(dim=-1)[0] / hidden.norm(dim=-1)[0]\n"
        "for tok, c in zip(tokens, change.tolist()):\n"
        "    print(f'{tok:>10s}  relative change of the final representation: {c:.3f}')\n"
        "assert not any(h.fwd_hooks for h in model.hook_dict.values())  # nothing left attached"
    ),
    nbf.v4.new_markdown_cell(
        "## The causal LM: the masked triangle, and a head's effect on the next token\n\n"
        "SmolLM2-135M (Llama architecture: RoPE, RMSNorm, SwiGLU, grouped-query attention)."
    ),
    nbf.v4.new_code_cell(
        "lm = models.load('smollm2')\n"
        "prompt = 'The keys to the cabinet'\n"
        "b = lm.to_words([prompt])\n"
        "logits, c = lm.run_with_cache(b.input_ids, names_filter='blocks.3.attn.hook_pattern')\n"
        "p = c['blocks.3.attn.hook_pattern'][0, 0]\n"
        "print('upper triangle is exactly zero:', bool((p.triu(1) == 0).all()))\n"
        "ax = sns.heatmap(p, xticklabels=b.tokens[0], yticklabels=b.tokens[0], cmap='viridis', vmin=0, vmax=1, square=True)\n"
        "ax.set(title='SmolLM2 layer 3 head 0 (causal)'); plt.show()\n"
        "are, is_ = lm.tokenizer.hf.encode(' are')[0], lm.tokenizer.hf.encode(' is')[0]\n"
        "print('logit(are) - logit(is):', (logits[0, -1, are] - logits[0, -1, is_]).item())"
    ),
    nbf.v4.new_markdown_cell(
        "## Coming from TransformerLens\n\n"
        "TransformerLens code runs unchanged: `to_tokens` returns a `[batch, pos]` tensor, `run_with_cache` "
        "returns TransformerLens's own `ActivationCache`, the stacked weights and `FactoredMatrix` circuits "
        "are there, `transformer_lens.patching` takes the model, and `generate` continues text (greedy output "
        "equals Hugging Face's token for token). On SmolLM2 a cached run's numbers (the eager attention path, "
        "which materialises the patterns) are bitwise those of TransformerLens's `TransformerBridge` on the "
        "same tokens; a plain `lm(tokens)` runs the fused SDPA path (bitwise Hugging Face's default SDPA "
        "attention, ~1e-5 from eager), and `lm(tokens, exact=True)` the eager one. One default differs: our `to_tokens` adds no BOS to SmolLM2 "
        "text (the bridge prepends `<|im_start|>`, SmolLM2's chat-turn marker); pass `prepend_bos=True` "
        "for the bridge's tokens."
    ),
    nbf.v4.new_code_cell(
        "prompt = 'When Mary and John went to the store, John gave a drink to'\n"
        "tokens = lm.to_tokens(prompt)                      # TransformerLens: a LongTensor [1, pos]\n"
        "print(tokens.shape, lm.to_str_tokens(prompt)[:6])\n"
        "logits, cache = lm.run_with_cache(tokens)          # a transformer_lens.ActivationCache\n"
        "print(type(cache).__mro__[1], cache['pattern', 3].shape)\n"
        "mary, john = lm.to_single_token(' Mary'), lm.to_single_token(' John')\n"
        "print('logit diff Mary - John:', (logits[0, -1, mary] - logits[0, -1, john]).item())"
    ),
    nbf.v4.new_markdown_cell(
        "Direct logit attribution: each head's output at the last position, divided by the final norm's "
        "scale, dotted with the Mary - John unembedding direction (TransformerLens's own `stack_head_results` "
        "and `logit_attrs`)."
    ),
    nbf.v4.new_code_cell(
        "heads, labels = cache.stack_head_results(layer=-1, return_labels=True)\n"
        "dla = cache.logit_attrs(heads[:, :, -1], torch.tensor([mary]), torch.tensor([john]), pos_slice=-1)[:, 0]\n"
        "top = dla.abs().argsort(descending=True)[:5]\n"
        "for i in top.tolist():\n"
        "    print(f'{labels[i]:>6s}  {dla[i].item():+.3f}')\n"
        "layer, head = (int(x) for x in labels[top[0]][1:].split('H'))"
    ),
    nbf.v4.new_markdown_cell(
        "The same head's circuits as `FactoredMatrix` (`lm.OV`, `lm.QK` are `[layer, head, d_model, d_model]`, "
        "never multiplied out; under grouped-query attention `lm.W_K` repeats each key/value head for the query "
        "heads it serves, `lm._W_K` is grouped), and activation patching with `transformer_lens.patching` on "
        "the model itself: the head's `z` from the clean prompt put into a corrupted one."
    ),
    nbf.v4.new_code_cell(
        "import pandas as pd\n"
        "from transformer_lens import patching\n"
        "ov = lm.OV[layer, head]\n"
        "print(type(ov).__name__, tuple(ov.shape), 'inner dim', ov.mdim, 'norm', round(ov.norm().item(), 2))\n"
        "print('W_Q', tuple(lm.W_Q.shape), 'W_K', tuple(lm.W_K.shape), '_W_K', tuple(lm._W_K.shape))\n"
        "corrupted = lm.to_tokens('When Mary and John went to the store, Mary gave a drink to')\n"
        "metric = lambda lg: (lg[:, -1, mary] - lg[:, -1, john]).mean()\n"
        "picked = pd.DataFrame([(layer, head), (layer, (head + 1) % lm.cfg.n_heads)], columns=['layer', 'head'])\n"
        "patched = patching.generic_activation_patch(lm, corrupted, cache, metric, activation_name='z',\n"
        "    patch_setter=patching.layer_head_vector_patch_setter, index_df=picked)\n"
        "print('corrupted:', metric(lm(corrupted)).item(), ' patched heads:', patched.tolist())"
    ),
    nbf.v4.new_code_cell("print(lm.generate('The keys to the cabinet', max_new_tokens=12, do_sample=False))"),
]
write(cells, "01_hooks_tour.ipynb")
