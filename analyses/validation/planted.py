"""A planted model for testing causal validation: one head is the only path for the information
the output needs, a decoy head has the same attention pattern and writes nothing."""

from __future__ import annotations

import torch

__all__ = ["planted_model", "planted_copies"]


def planted_model(n_layers: int = 2, n_heads: int = 24, vocab: int = 12, n_ctx: int = 12, seed: int = 0):
    """A causal attention-only model whose weights are set by hand.

    Residual stream = [token one-hot (vocab) | position one-hot (n_ctx) | "previous token" slot (vocab)].
    Head (0, 0), **A**, attends from position p to p-1 (queries and keys read the position one-hots),
    copies the token there (W_V) into the previous-token slot (W_O); the unembedding reads only that
    slot, so on period-2 sequences (a b a b ...) A alone predicts the next token. Head (0, 1),
    **B**, is a decoy with A's W_Q, W_K, W_V, hence the same attention pattern, and W_O = 0. Every
    other head has small random weights (seeded), so random-head ablations have a spread of small
    effects. MLPs are zero. Returns (model, {"A": (0, 0), "B": (0, 1)})."""
    import models  # analyses may use models; imported here so the module stays light

    d_model = 2 * vocab + n_ctx
    cfg = models.Config(
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_head=max(vocab, n_ctx),
        d_mlp=4,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="rmsnorm",
        attn_scale=1.0,
        name="planted",
    )
    model = models.Transformer(cfg, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed)
    tok, pos, prev = 0, vocab, vocab + n_ctx
    with torch.no_grad():
        model.W_E.zero_()
        model.W_E[torch.arange(vocab), tok + torch.arange(vocab)] = 1.0
        model.W_pos.zero_()
        model.W_pos[torch.arange(n_ctx), pos + torch.arange(n_ctx)] = 1.0
        for block in model.blocks:
            attn = block.attn
            shape_q, shape_o = attn.W_Q.shape, attn.W_O.shape
            attn.W_Q = torch.randn(shape_q, generator=gen) * 0.3
            attn.W_K = torch.randn(attn.W_K.shape, generator=gen) * 0.3
            attn.W_V = torch.randn(attn.W_V.shape, generator=gen) * 0.3
            attn.W_O = torch.randn(shape_o, generator=gen) * 0.02
            block.mlp.W_in = torch.zeros_like(block.mlp.W_in)
            block.mlp.W_out = torch.zeros_like(block.mlp.W_out)
        attn = model.blocks[0].attn
        wq = torch.zeros(d_model, cfg.d_head)
        wk = torch.zeros(d_model, cfg.d_head)
        wv = torch.zeros(d_model, cfg.d_head)
        wo = torch.zeros(cfg.d_head, d_model)
        for p in range(n_ctx):
            wq[pos + p, p] = 1.0  # query at p asks for basis p
            if p + 1 < n_ctx:
                wk[pos + p, p + 1] = 1.0  # key at j answers to query j+1
        for t in range(vocab):
            wv[tok + t, t] = 1.0
            wo[t, prev + t] = 1.0
        for h in (0, 1):
            attn.W_Q[h] = wq
            attn.W_K[h] = wk
            attn.W_V[h] = wv
        attn.W_O[0] = wo
        attn.W_O[1] = torch.zeros_like(wo)  # the decoy: same pattern, writes nothing
        model.unembed_weight.zero_()
        model.unembed_weight[torch.arange(vocab), prev + torch.arange(vocab)] = 5.0
    return model, {"A": (0, 0), "B": (0, 1)}


def planted_copies(
    scales: dict,
    n_layers: int = 2,
    n_heads: int = 24,
    vocab: int = 12,
    n_ctx: int = 12,
    unembed: float = 5.0,
    noise: float = 0.02,
    seed: int = 0,
):
    """``planted_model``'s design with the previous-token copy spread over several heads: every head
    ``(layer, head)`` of ``scales`` attends from p to p-1 and writes ``scale`` x the copied token
    into the previous-token slot, which the unembedding reads (x ``unembed``) after the final
    RMSNorm. The norm saturates: two heads of scale 5 each carry the task alone, so ablating one
    costs little and ablating both costs everything (a distributed behaviour). The other heads have
    random weights (W_O x ``noise``). Returns the model."""
    model, _ = planted_model(n_layers=n_layers, n_heads=n_heads, vocab=vocab, n_ctx=n_ctx, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        a = model.blocks[0].attn
        wq, wk, wv, wo = a.W_Q[0].clone(), a.W_K[0].clone(), a.W_V[0].clone(), a.W_O[0].clone()
        for block in model.blocks:
            block.attn.W_O = torch.randn(block.attn.W_O.shape, generator=gen) * noise
        for (layer, head), s in scales.items():
            attn = model.blocks[layer].attn
            attn.W_Q[head], attn.W_K[head], attn.W_V[head], attn.W_O[head] = wq, wk, wv, wo * float(s)
        model.unembed_weight.mul_(unembed / 5.0)
    return model
