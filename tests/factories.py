"""Test factories, in one place: tiny seeded configs and models, a padded batch, and the planted
word-level model whose heads are set by hand (tests import these; no test imports another test)."""

from __future__ import annotations

import numpy as np
import torch

import models
from analyses.data import Item


def tiny_hf_llama_config(vocab_size: int, **overrides):
    """A tiny Hugging Face Llama config (2 layers, 4 heads, 2 key/value heads, d_model 32): the model
    the loading, hub and TransformerLens-idiom tests save and read back."""
    import transformers

    base = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    base.update(overrides)
    return transformers.LlamaConfig(**base)


def tiny_config(**overrides) -> models.Config:
    base = dict(d_model=32, n_layers=2, n_heads=4, d_head=8, d_mlp=64, d_vocab=50, n_ctx=32, name="tiny")
    base.update(overrides)
    return models.Config(**base)


# name -> Config overrides. Together: pre/post norm, layer/rms norm, GQA, learned / sinusoidal /
# rope (plain, interleaved, partial) / alibi / none, gated / standard MLP, biases on / off.
TINY = {
    "gpt2_like": dict(attn_bias=True, attn_out_bias=True, mlp_bias=True, act="gelu_new", tie_embeddings=True),
    "bert_like": dict(
        attention="bidirectional",
        norm_placement="post",
        embed_norm=True,
        final_norm=False,
        n_token_types=2,
        attn_bias=True,
        attn_out_bias=True,
        mlp_bias=True,
        lm_head=False,
    ),
    "llama_like": dict(positional="rope", norm="rmsnorm", act="silu", mlp="gated", n_kv_heads=2, eps=1e-6),
    "qwen_like": dict(positional="rope", norm="rmsnorm", act="silu", mlp="gated", n_kv_heads=1, attn_bias=True),
    "rope_partial_interleaved": dict(
        attention="bidirectional", positional="rope", rope_interleaved=True, rotary_dim=4, mlp_bias=True
    ),
    "alibi": dict(positional="alibi", attn_bias=True, act="relu"),
    "alibi_bidir_gqa": dict(attention="bidirectional", positional="alibi", n_kv_heads=2, mlp="gated", act="silu"),
    "sinusoidal_bidir": dict(attention="bidirectional", positional="sinusoidal", act="relu", attn_out_bias=True),
    "none_post_rms": dict(positional="none", norm="rmsnorm", norm_placement="post", final_norm=False),
}


def randomized(cfg: models.Config, seed: int = 0) -> models.Transformer:
    """A tiny model whose biases and norm weights are random too (init sets them to 0 and 1,
    which would hide a forgotten bias or norm weight)."""
    model = models.Transformer(cfg, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "w":
                p.add_(0.2 * torch.randn(p.shape, generator=gen))
            elif leaf == "b" or leaf.endswith("bias") or leaf == "b_U":
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:  # larger weights than GPT-2 init, so attention patterns are far from uniform
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    return model


def tiny_model(key: str, seed: int = 0) -> models.Transformer:
    return randomized(tiny_config(**TINY[key]), seed=seed)


def tiny_batch(cfg: models.Config, seed: int = 0):
    """Tokens [3, 9] with a full row, a right-padded row and a left-padded row."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, cfg.d_vocab, (3, 9), generator=gen)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, :4] = 0
    return tokens, mask


# --------------------------------------------------------------------------------------------------
# A tiny word-level vocabulary and tokenizer, so planted weights can key on word identity

SUBJECTS = ["cat", "dog", "bird", "fox"]
ATTRACTORS = ["mat", "tree", "box", "car"]
VERBS = ["sleeps", "runs", "sits", "barks"]
VOCAB = ["[PAD]", "[UNK]", "the", "of", "near", "old", "big", "."] + SUBJECTS + ATTRACTORS + VERBS + ["[CLS]", "[SEP]"]
ID = {w: i for i, w in enumerate(VOCAB)}
N_CTX = 16


def word_tokenizer(specials: bool = False):
    """One token per word of ``VOCAB``; ``specials=True`` wraps every sentence in [CLS] ... [SEP]
    as BERT's tokenizer does."""
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers import models as tm
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(tm.WordLevel(dict(ID), unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    extra = {}
    if specials:
        t.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", ID["[CLS]"]), ("[SEP]", ID["[SEP]"])]
        )
        extra = {"cls_token": "[CLS]", "sep_token": "[SEP]"}
    hf = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", pad_token="[PAD]", **extra)
    return models.Tokenizer(hf)


def planted_items(n: int, seed: int) -> list[Item]:
    """'the S of the A V .' (subject 4 words back) and 'the S near the old A V .' (5 back): the best
    fixed offset is right only about half the time; the planted head is always right. A third of
    them start with a fronted 'near the A' (no comma: the planted vocabulary has none), so the
    subject is not always the first noun and no noun heuristic is right everywhere."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s, a, v = rng.choice(SUBJECTS), rng.choice(ATTRACTORS), rng.choice(VERBS)
        if rng.random() < 0.5:
            words = ("the", s, "of", "the", a, v, ".")
        else:
            words = ("the", s, "near", "the", rng.choice(["old", "big"]), a, v, ".")
        lead = ("near", "the", rng.choice(ATTRACTORS)) if rng.random() < 1 / 3 else ()
        words = lead + words
        out.append(
            Item(
                words=words,
                relation="subject_verb",
                query=len(words) - 2,
                target=len(lead) + 1,
                candidates=((2,) if lead else ()) + (len(lead) + 1, len(words) - 3),
                source="generated:planted",
            )
        )
    return out


def planted_model(
    attention: str = "bidirectional", sep_weight: float | None = None, values: bool = False
) -> models.Transformer:
    """One layer, four heads, weights set by hand (RMSNorm keeps one-hot codes one-hot, scaled):
    head 0 attends to the previous token, head 1 to '.', head 2 from a verb to the subject noun,
    head 3 has zero weights (uniform attention). ``values=True`` gives every head random value and
    output weights, except that head 1 writes nothing for '.' (its value vector there is zero): a
    head that attends to a delimiter and moves nothing from it."""
    n_vocab = len(VOCAB)
    d_model = N_CTX + n_vocab
    cfg = tiny_config(
        d_model=d_model,
        n_layers=1,
        n_heads=4,
        d_head=N_CTX,
        d_mlp=8,
        d_vocab=n_vocab,
        n_ctx=N_CTX,
        norm="rmsnorm",
        attention=attention,
        lm_head=False,
        name="planted",
    )
    m = models.Transformer(cfg, tokenizer=word_tokenizer(specials=sep_weight is not None), seed=0).eval()
    beta = 4.0  # score = beta * d_model/2 / sqrt(d_head) = 20 for a match: softmax is one-hot
    with torch.no_grad():
        m.W_E.zero_()
        m.W_E[:, N_CTX:] = torch.eye(n_vocab)
        m.W_pos.zero_()
        m.W_pos[:, :N_CTX] = torch.eye(N_CTX)
        attn = m.blocks[0].attn
        for w in (attn.W_Q, attn.W_K, attn.W_V, attn.W_O):
            w.zero_()
        WQ, WK = attn.W_Q.clone(), attn.W_K.clone()
        for p in range(N_CTX):  # head 0: query at p matches key at p - 1
            WQ[0, p, p] = beta
            if p + 1 < N_CTX:
                WK[0, p, p + 1] = 1.0
        WQ[1, :N_CTX, 0] = beta  # head 1: every query, keys that are '.'
        WK[1, N_CTX + ID["."], 0] = 1.0
        for v in VERBS:  # head 2: verb queries, subject-noun keys
            WQ[2, N_CTX + ID[v], 0] = beta
        for s in SUBJECTS:
            WK[2, N_CTX + ID[s], 0] = 1.0
        if sep_weight is not None:  # head 2 puts its largest weight on [SEP], the subject second
            WK[2, N_CTX + ID["[SEP]"], 0] = sep_weight
        attn.W_Q, attn.W_K = WQ, WK
        if values:
            gen = torch.Generator().manual_seed(7)
            WV = torch.randn(attn.W_V.shape, generator=gen)
            WV[1, :N_CTX] = 0.0  # head 1: values from the token identity only,
            WV[1, N_CTX + ID["."]] = 0.0  # and none at all for '.'
            attn.W_V, attn.W_O = WV, torch.randn(attn.W_O.shape, generator=gen)
        for p in m.blocks[0].mlp.parameters():
            p.zero_()
    return m


def tiny_train_config(steps: int = 4) -> dict:
    """An ``interp train`` config (the JSON/TOML tables) for a one-layer model trained in seconds."""
    return {
        "model": {
            "name": "cli-tiny",
            "d_model": 16,
            "n_layers": 1,
            "n_heads": 2,
            "d_head": 8,
            "d_mlp": 32,
            "n_ctx": 16,
            "attention": "causal",
            "positional": "alibi",
            "tie_embeddings": True,
        },
        "training": {"steps": steps, "batch_size": 4, "warmup_steps": 1, "eval_windows": 4, "seed": 3},
        "data": {"vocab_size": 280, "max_passages": 80},
    }


def tiny_text_budget(**overrides):
    """A natural-text budget of the positional study small enough for a test (seconds): 1 layer,
    d_model 32, context 32, a 300-token BPE on 150 passages; ``train`` overrides go through
    ``train=dict(...)`` (or a whole ``TrainConfig``), the rest replace the budget's fields."""
    from analyses.positional.study import Budget
    from models.training import TrainConfig

    given = overrides.pop("train", {})
    if isinstance(given, TrainConfig):
        return Budget(train=given, **{**_TEXT_FIELDS, **overrides})
    train = dict(steps=6, batch_size=4, lr=5e-3, warmup_steps=1, eval_windows=4, threads=1)
    train.update(given)
    return Budget(train=TrainConfig(**train), **{**_TEXT_FIELDS, **overrides})


_TEXT_FIELDS = dict(
    name="test-text", d_model=32, n_layers=1, n_heads=2, d_mlp=64, n_ctx=32, vocab_size=300, max_passages=150,
    eval_windows=4, head_batch=4,
)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Tiny Hugging Face checkpoints of the families with other norm placements, read back by models.load

FAMILY_NORMS = {"gemma3": "sandwich", "olmo2": "reordered"}


def save_tiny_family(key: str, folder, vocab_size: int = 97, tokenizer=None, seed: int = 0):
    """Save a tiny random Gemma 3 (sandwich norms, QK-norm, a sliding and a full layer) or OLMo-2
    (reordered norms: none before attention, ln1_post / ln2_post on the outputs) checkpoint into
    ``folder`` (with ``tokenizer``, a Hugging Face tokenizer, beside it) and return ``folder``: what
    ``models.load(folder)`` reads. Every tensor is perturbed, so no norm weight sits at its init."""
    import torch
    import transformers as t

    common = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=48, num_attention_heads=4,
                  max_position_embeddings=64, num_hidden_layers=2)  # fmt: skip
    if key == "gemma3":
        cfg = t.Gemma3TextConfig(
            **common, num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=8, sliding_window=4,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            },
        )  # fmt: skip
        cls = t.Gemma3ForCausalLM
    elif key == "olmo2":
        cfg, cls = t.Olmo2Config(**common, num_key_value_heads=2, eos_token_id=None), t.Olmo2ForCausalLM
    else:
        raise ValueError(f"key={key!r}; use one of {', '.join(FAMILY_NORMS)}")
    torch.manual_seed(seed)
    hf = cls(cfg).eval()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    hf.save_pretrained(str(folder))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))
    return folder


def run_unblocking_fifo(call, fifo, timeout: float = 30.0) -> tuple[dict, bool]:
    """``call()`` in a thread: ({"value": its result} or {"error": what it raised}, whether it hung). A
    call that blocks reading the FIFO ``fifo`` is unblocked (a writer opened and closed) after
    ``timeout`` seconds, so a test fails instead of hanging."""
    import os
    import stat
    import threading

    outcome: dict = {}

    def run():
        try:
            outcome["value"] = call()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=timeout)
    hung = thread.is_alive()
    if hung and stat.S_ISFIFO(os.lstat(fifo).st_mode):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=timeout)
    return outcome, hung
