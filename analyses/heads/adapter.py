"""The model adapter: what the probe needs from a model (a word tokenizer, the
``blocks.{l}.attn.hook_pattern`` hooks and one forward call), for the toolkit's ``models.Transformer``
and a ``transformer_lens.TransformerBridge`` alike; the sink position every sentence starts with; and
the randomly initialised model of the same architecture that the null scores come from."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from interp.names import act_name
from interp.view import ModelView, view

__all__ = ["Adapter", "adapt", "sink_tokenizer", "model_input", "SINK_TOKENS"]


@dataclass(frozen=True)
class Adapter:
    """What the probe needs from a model: its ``ModelView`` (shape, causality, forward with hooks)
    and a word-aligning ``models.Tokenizer`` (``tokenizer.words(word_lists)`` -> ``models.Batch``)."""

    view: ModelView
    tokenizer: object  # models.Tokenizer
    sink: str = "first token"  # what position 0 of every sentence is (``sink_tokenizer``)

    name = property(lambda self: self.view.name)
    n_layers = property(lambda self: self.view.n_layers)
    n_heads = property(lambda self: self.view.n_heads)
    is_causal = property(lambda self: self.view.causal)
    n_ctx = property(lambda self: self.view.n_ctx)
    d_vocab = property(lambda self: self.view.d_vocab or len(self.tokenizer.hf))
    model = property(lambda self: self.view.model)
    device = property(lambda self: self.view.device)

    @property
    def special_ids(self) -> tuple[int, ...]:
        return tuple(sorted({int(i) for i in (getattr(self.tokenizer.hf, "all_special_ids", None) or [])}))

    @staticmethod
    def hook_name(layer: int) -> str:
        return act_name(layer, "attn.hook_pattern")

    def forward(self, batch, fwd_hooks):
        """Run the model on a ``models.Batch`` (its tensors moved to the model's device) with
        temporary hooks (no unembedding where optional)."""
        dev = self.device

        def on(t):
            return t if t is None or dev.type == "cpu" else t.to(dev)

        return self.view.run_with_hooks(
            on(batch.input_ids),
            attention_mask=on(batch.attention_mask),
            token_type_ids=on(batch.token_type_ids),
            fwd_hooks=fwd_hooks,
            return_type=None,
        )

    def output_weights(self, layer: int):
        """W_O [head, d_head, d_model] of one layer as a float tensor (our model and TransformerLens),
        for the norm lens; None where the model has none."""
        w = getattr(self.model.blocks[layer].attn, "W_O", None)
        return None if w is None else torch.as_tensor(w).detach().float().clone()


def adapt(model, tokenizer=None, sink: bool = True) -> Adapter:
    """An ``Adapter`` for a ``models.Transformer`` or a ``transformer_lens.TransformerBridge`` (or
    any HookedRootModule-like model with ``cfg.n_layers``, ``cfg.n_heads``, ``hook_dict`` holding
    ``blocks.{l}.attn.hook_pattern`` and ``run_with_hooks``). ``tokenizer`` overrides the model's own
    (a ``models.Tokenizer`` or a Hugging Face fast tokenizer). ``sink=True`` (the default) starts
    every sentence with a special token where the tokenizer adds none (``sink_tokenizer``), so that
    the attention sink is a special token that ``specials="exclude"`` leaves out of every word
    argmax; ``sink=False`` keeps the tokenizer as it is."""
    if isinstance(model, Adapter):
        return model
    from models.tokenizer import ADD_TOKENIZER_FILES, Tokenizer

    v = view(model)
    names = set(getattr(model, "hook_dict", {}) or {})
    missing = [Adapter.hook_name(l) for l in range(v.n_layers) if Adapter.hook_name(l) not in names]
    if missing or not hasattr(model, "run_with_hooks"):
        near = sorted(n for n in names if n.endswith("pattern"))[:4]
        raise ValueError(
            f"{type(model).__name__} does not expose the hooks the probe needs: {missing[:3]}"
            f"{' ...' if len(missing) > 3 else ''} "
            "(need blocks.{l}.attn.hook_pattern [batch, head, query_pos, key_pos] "
            f"for every layer and run_with_hooks){'; it has ' + ', '.join(near) if near else ''}"
        )
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is None:
        name = getattr(getattr(model, "cfg", None), "name", None)
        raise ValueError(
            f"the model{f' {name!r}' if name else ''} has no tokenizer attached, and the head probe reads text: "
            f"{ADD_TOKENIZER_FILES} (from Python: or pass tokenizer=, a models.Tokenizer or a fast HF tokenizer)"
        )
    if not isinstance(tok, Tokenizer):
        tok = Tokenizer(tok)
    tok, what = sink_tokenizer(tok) if sink else (tok, _sink_of(tok))
    return Adapter(view=v, tokenizer=tok, sink=what)


# the special tokens a sentence may start with where the tokenizer adds none, in order of preference:
# a pre-training document separator (GPT-2's and SmolLM2's ``<|endoftext|>``) before the tokenizer's
# own BOS (SmolLM2's is ``<|im_start|>``, the instruct model's chat-turn marker)
SINK_TOKENS = ("<|endoftext|>",)


def _sink_of(tok) -> str:
    """What position 0 of a sentence is under ``tok``: its special token, else "first word"."""
    hf = tok.hf
    if tok.prepend_bos and tok.bos_token_id is not None:
        return hf.convert_ids_to_tokens(tok.bos_token_id)
    ids = list(hf("x")["input_ids"])
    special = set(hf.all_special_ids) - {hf.unk_token_id}
    return hf.convert_ids_to_tokens(ids[0]) if ids and ids[0] in special else "first word"


def _layer_types(adapter: Adapter) -> list[str] | None:
    """Each layer's attention type ("sliding" or "full") where the model mixes the two (Gemma 3's
    sliding-window and global layers), else None: the report compares the roles of the two kinds."""
    cfg = getattr(adapter.model, "cfg", None)
    if cfg is None or not hasattr(cfg, "layer_type"):
        return None
    types = [str(cfg.layer_type(l)) for l in range(adapter.n_layers)]
    return types if len(set(types)) > 1 else None


def sink_tokenizer(tok) -> tuple[object, str]:
    """(the tokenizer the head analyses use, what its sink position is). Every model gets an
    explicit sink position that the relation scorers leave out of the argmax, as Clark et al.
    (2019) leave out [CLS] and [SEP]: position 0, a special token. A tokenizer that starts every
    sentence with one ([CLS], ``<s>``) is kept. One that adds none (SmolLM2: no BOS, so its sink
    would be the sentence's first word, which cannot then be anyone's subject) gets a copy that
    prepends the first of ``SINK_TOKENS`` it knows, else its BOS token: ``"<|endoftext|> (prepended)"``.
    With neither, the sink stays the first word ("first word"). The model's own tokenizer, and so
    ``to_tokens``, is not changed."""
    from models.tokenizer import Tokenizer

    first = _sink_of(tok)
    if first != "first word":
        return tok, first
    known = set(tok.hf.all_special_tokens)
    choice = next((t for t in SINK_TOKENS if t in known), None) or tok.hf.bos_token
    if choice is None:
        return tok, first
    return Tokenizer(tok.hf, prepend_bos=True, bos=choice), f"{choice} (prepended)"


def model_input(tokenizer) -> tuple[object, str]:
    """The one input convention of every analysis of a model (the probe, validation, the contrastive
    pairs of circuits and the powered run, the explorer): (the ``models.Tokenizer`` they tokenise
    with, the convention in words for each output's info). It is ``sink_tokenizer``'s: a sink token
    first where the tokenizer adds none and the model has one ("prepend <|endoftext|>" on SmolLM2),
    else the tokenizer as it is ("as tokenised ([CLS] first)", "as tokenised (no sink token)")."""
    from models.tokenizer import Tokenizer

    tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer(tokenizer)
    tok, what = sink_tokenizer(tok)
    if tok.prepend_bos and tok.bos_token is not None:
        return tok, f"prepend {tok.bos_token}"
    return tok, f"as tokenised ({what} first)" if what != "first word" else "as tokenised (no sink token)"


def _null_network(adapter: Adapter, seed: int):
    """A randomly initialised model of the same architecture, or None (bridges: not built)."""
    import models

    m = adapter.model
    if not isinstance(m, models.Transformer):
        return None
    null = models.Transformer(m.cfg, tokenizer=m.tokenizer, seed=seed + 12345).eval()
    return null.to(adapter.device)
