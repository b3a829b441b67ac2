"""TransformerLens's user API on the toolkit's ``Transformer`` (a mixin it inherits), kept apart from
the model so that ``models/transformer.py`` reads as the model alone.

What TransformerLens users write works here as on TransformerLens's own models (docs/hooks.md,
"Coming from TransformerLens"): ``to_tokens`` returns a token tensor (``to_words``, on the model,
keeps the token-to-word alignment), ``to_str_tokens`` / ``to_single_token`` / ``to_string``, the
weights stacked over layers (``model.W_Q`` [layer, head, d_model, d_head], copies) with
``model.OV`` / ``model.QK`` as ``FactoredMatrix``, ``tokens_to_residual_directions``,
``inputs_bound`` (forward arguments bound to a token tensor, for ``transformer_lens.patching``) and
``generate`` with a ``KVCache`` that keeps Hugging Face's operations (both in ``models/generate.py``:
``generate`` is bound here as the method, ``KVCache`` re-exported). Everything here reads the
model through its public parts (``cfg``, ``blocks``, ``W_U``, ``tokenizer``, ``forward``) and
``_unembed``; nothing here takes part in an unhooked forward pass.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

import torch
from torch import Tensor

from models.generate import KVCache
from models.generate import generate as _generate

if TYPE_CHECKING:
    import numpy as np
    from transformer_lens import FactoredMatrix

    from models.config import Config
    from models.tokenizer import Tokenizer

    # token ids [batch, pos] or [pos], in any form ``torch.as_tensor`` takes
    TokenIds: TypeAlias = Tensor | np.ndarray | Sequence[int] | Sequence[Sequence[int]]

__all__ = ["KVCache", "TransformerLensAPI"]  # KVCache: re-exported from models/generate.py


# Forward arguments ``inputs_bound`` may bind to a token tensor
_BINDABLE = frozenset({"attention_mask", "token_type_ids", "return_type", "allow_beyond_ctx", "exact"})


class TransformerLensAPI:
    """TransformerLens's user API, for a model with ``cfg``, ``blocks``, ``W_U``, ``tokenizer``,
    ``_require_tokenizer()``, ``_unembed()`` and a ``forward`` taking ``past_kv_cache`` (the
    toolkit's ``Transformer``, which inherits it)."""

    if TYPE_CHECKING:
        cfg: Config
        blocks: Any
        W_E: Tensor
        W_U: Tensor

        def _require_tokenizer(self) -> Tokenizer: ...
        def _unembed(self, x: Tensor) -> Tensor: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    # -- the tokenizer, bound to the config ------------------------------------------------------

    @property
    def tokenizer(self) -> Tokenizer | None:
        """The model's tokenizer (a ``models.tokenizer.Tokenizer``; None: token ids only)."""
        return self.__dict__.get("_tokenizer")

    @tokenizer.setter
    def tokenizer(self, tokenizer: Tokenizer | None) -> None:
        # bound to the config too, whose TransformerLens names (``cfg.default_prepend_bos``,
        # ``cfg.tokenizer_prepends_bos``, ``cfg.default_padding_side``) read it; a plain attribute,
        # not a submodule or parameter, whatever the object (tests hand in stand-ins)
        self.__dict__["_tokenizer"] = tokenizer
        cfg = self.__dict__.get("cfg")
        if cfg is not None:
            cfg._bind_tokenizer(tokenizer)

    # -- weights stacked over layers -------------------------------------------------------------

    # Stacked over layers, TransformerLens's ``model.W_Q`` and friends. These are copies made on
    # each read (``torch.stack``), for reading and for circuits (``model.OV``, ``model.QK``); edit
    # a weight through the per-block views (``model.blocks[l].attn.W_Q``), which are the model.

    def _stack(self, part: str, name: str) -> Tensor:
        parts = [getattr(getattr(block, part), name) for block in self.blocks]
        shapes = {tuple(p.shape) for p in parts}
        if len(shapes) > 1:  # e.g. dense and mixture-of-experts layers (Qwen2-MoE's mlp_only_layers)
            raise ValueError(
                f"model.{name} stacks the layers' {part}.{name}, but their shapes differ ({sorted(shapes)}: dense "
                f"and mixture-of-experts layers); read model.blocks[l].{part}.{name} per layer"
            )
        return torch.stack(parts)

    def _stack_bias(self, part: str, name: str, *shape: int) -> Tensor:
        """A bias stacked over layers; zeros where the architecture has none (a copy cannot be
        edited, so zeros, as in TransformerLens's HookedTransformer, mislead no one)."""
        first = getattr(getattr(self.blocks[0], part), name)
        if first is None:
            return torch.zeros(self.cfg.n_layers, *shape, device=self.cfg.device, dtype=self.cfg.dtype)
        return self._stack(part, name)

    def _expand_kv(self, t: Tensor) -> Tensor:
        """[layer, kv_head, ...] -> [layer, head, ...]: query head h reads key/value head h // group."""
        return t if self.cfg.group_size == 1 else t.repeat_interleave(self.cfg.group_size, dim=1)

    @property
    def W_Q(self) -> Tensor:
        """[layer, head, d_model, d_head] (a copy)."""
        return self._stack("attn", "W_Q")

    @property
    def W_K(self) -> Tensor:
        """[layer, head, d_model, d_head] (a copy). Under grouped-query attention each key/value
        head appears once per query head it serves, as TransformerLens's ``W_K`` does; ``_W_K`` is
        the grouped [layer, kv_head, d_model, d_head]."""
        return self._expand_kv(self._W_K)

    @property
    def W_V(self) -> Tensor:
        """[layer, head, d_model, d_head] (a copy; grouped: ``_W_V``)."""
        return self._expand_kv(self._W_V)

    @property
    def _W_K(self) -> Tensor:
        """[layer, kv_head, d_model, d_head] (a copy)."""
        return self._stack("attn", "W_K")

    @property
    def _W_V(self) -> Tensor:
        """[layer, kv_head, d_model, d_head] (a copy)."""
        return self._stack("attn", "W_V")

    @property
    def W_O(self) -> Tensor:
        """[layer, head, d_head, d_model] (a copy)."""
        return self._stack("attn", "W_O")

    @property
    def b_Q(self) -> Tensor:
        """[layer, head, d_head] (a copy; zeros without query biases)."""
        return self._stack_bias("attn", "b_Q", self.cfg.n_heads, self.cfg.d_head)

    @property
    def b_K(self) -> Tensor:
        """[layer, head, d_head] (a copy; grouped: ``_b_K``)."""
        return self._expand_kv(self._b_K)

    @property
    def b_V(self) -> Tensor:
        """[layer, head, d_head] (a copy; grouped: ``_b_V``)."""
        return self._expand_kv(self._b_V)

    @property
    def _b_K(self) -> Tensor:
        return self._stack_bias("attn", "b_K", self.cfg.kv_heads, self.cfg.d_head)

    @property
    def _b_V(self) -> Tensor:
        return self._stack_bias("attn", "b_V", self.cfg.kv_heads, self.cfg.d_head)

    @property
    def b_O(self) -> Tensor:
        """[layer, d_model] (a copy)."""
        return self._stack_bias("attn", "b_O", self.cfg.d_model)

    @property
    def W_in(self) -> Tensor:
        """[layer, d_model, d_mlp] (a copy; the linear branch of gated MLPs)."""
        return self._stack("mlp", "W_in")

    @property
    def W_gate(self) -> Tensor | None:
        """[layer, d_model, d_mlp] (a copy); None for ungated MLPs."""
        return self._stack("mlp", "W_gate") if self.cfg.mlp == "gated" else None

    @property
    def W_out(self) -> Tensor:
        """[layer, d_mlp, d_model] (a copy)."""
        return self._stack("mlp", "W_out")

    @property
    def b_in(self) -> Tensor:
        return self._stack_bias("mlp", "b_in", self.cfg.d_mlp)

    @property
    def b_out(self) -> Tensor:
        return self._stack_bias("mlp", "b_out", self.cfg.d_model)

    @property
    def QK(self) -> FactoredMatrix:
        """Every head's QK circuit ``W_Q[l, h] @ W_K[l, h].T`` [layer, head, d_model, d_model], as
        a ``transformer_lens.FactoredMatrix`` (never multiplied out)."""
        from transformer_lens import FactoredMatrix

        return FactoredMatrix(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def OV(self) -> FactoredMatrix:
        """Every head's OV circuit ``W_V[l, h] @ W_O[l, h]`` [layer, head, d_model, d_model], as a
        ``transformer_lens.FactoredMatrix``."""
        from transformer_lens import FactoredMatrix

        return FactoredMatrix(self.W_V, self.W_O)

    def accumulated_bias(self, layer: int, mlp_input: bool = False, include_mlp_biases: bool = True) -> Tensor:
        """The sum of the biases the blocks before ``layer`` write into the residual stream
        [d_model]: each attention output bias ``b_O`` and (``include_mlp_biases``) each MLP output
        bias ``b_out``; with ``mlp_input``, also layer ``layer``'s own ``b_O`` (the stream its MLP
        reads). Zeros for a model without biases (SmolLM2). What TransformerLens's
        ``ActivationCache.get_full_resid_decomposition`` adds as its "bias" component, the terms
        that head and neuron results leave out. ``layer`` in 0..n_layers (n_layers: the stream
        the unembedding reads). Pre-norm models only: a post-norm model's norms rescale the
        residual stream itself, so no sum of biases is a part of it."""
        cfg = self.cfg
        if getattr(cfg, "norm_placement", "pre") == "post":
            raise ValueError(
                f"accumulated_bias: {cfg.name!r} is post-norm (its norms rescale the residual stream itself), so the "
                "stream is not a sum of components and no sum of biases is one; decompose a pre-norm model"
            )
        if not 0 <= layer <= cfg.n_layers or (mlp_input and layer == cfg.n_layers):
            top = f"{cfg.n_layers - 1} with mlp_input" if mlp_input else cfg.n_layers
            raise ValueError(f"accumulated_bias: layer={layer}; use 0..{top}")
        total = torch.zeros(cfg.d_model, device=self.W_E.device, dtype=self.W_E.dtype)
        for i, block in enumerate(self.blocks[: layer + 1 if mlp_input else layer]):
            if block.attn.b_O is not None:
                total = total + block.attn.b_O
            if i < layer and include_mlp_biases and block.mlp.b_out is not None:
                total = total + block.mlp.b_out
        return total

    # -- tokens ----------------------------------------------------------------------------------

    def _adds_bos(self) -> int | None:
        """The id of the start token the tokenizer itself puts first, or None (``Tokenizer.own_start_id``)."""
        return self._require_tokenizer().own_start_id

    def _token_rows(self, texts: Sequence[str], prepend_bos: bool | None, truncate: bool) -> list[list[int]]:
        tok = self._require_tokenizer()
        if prepend_bos is None:  # the model's default, as to_words: the tokenizer's habit, or always a BOS
            prepend_bos = True if tok.prepend_bos else None
        added = self._adds_bos()
        bos = tok.hf.bos_token_id if added is None else added
        rows = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(
                    f"to_tokens takes a text or a list of texts, got {type(text).__name__} at {i}; "
                    "for word lists (token-to-word alignment) use model.to_words"
                )
            ids = list(tok.hf(text)["input_ids"])
            if prepend_bos is False and added is not None and ids[:1] == [added]:
                ids = ids[1:]
            elif prepend_bos and bos is not None and ids[:1] != [bos]:
                ids = [bos] + ids
            if truncate:
                ids = ids[: self.cfg.n_ctx]
            if not ids:
                raise ValueError(
                    f"text {i} ({text!r}) has no tokens; to start from the BOS token, pass prepend_bos=True"
                )
            rows.append(ids)
        return rows

    def _pad(self, rows: list[list[int]], padding_side: str) -> tuple[Tensor, Tensor]:
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side={padding_side!r}; use 'right' or 'left'")
        n = max(len(r) for r in rows)
        ids = torch.full((len(rows), n), self._require_tokenizer().pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), n), dtype=torch.long)
        for b, r in enumerate(rows):
            where = slice(0, len(r)) if padding_side == "right" else slice(n - len(r), n)
            ids[b, where], mask[b, where] = torch.tensor(r, dtype=torch.long), 1
        return ids, mask

    def to_tokens(
        self,
        input: str | Sequence[str],
        prepend_bos: bool | None = None,
        padding_side: str | None = None,
        move_to_device: bool = True,
        truncate: bool = True,
    ) -> Tensor:
        """TransformerLens's ``to_tokens``: text (or a list of texts) in, token ids [batch, pos]
        (a LongTensor) out, padded with the tokenizer's pad id.

        prepend_bos: None is the model's default, which is the tokenizer's own habit: MiniLM gets
            ``[CLS] ... [SEP]``, SmolLM2 gets no BOS (as Hugging Face tokenises it, as
            ``to_words`` and the analyses do; TransformerLens's bridge prepends ``<|im_start|>``,
            SmolLM2's chat-turn marker, which raises its loss on plain text, see docs/hooks.md).
            A tokenizer made with ``prepend_bos=True`` makes True the default. True: the BOS token
            comes first (``<|im_start|>`` on SmolLM2; MiniLM's ``[CLS]`` already is); False: the
            start token the tokenizer adds itself is removed (MiniLM's ``[CLS]``).
        padding_side: "right" or "left"; None: ``model.tokenizer.padding_side`` ("right" unless
            set), as on TransformerLens, whose ``utilities.get_attention_mask`` reads that too.
        truncate: cut each text to ``n_ctx`` tokens (keeping the start).

        A padded batch needs its mask when you run it: ``model(tokens, attention_mask=tokens !=
        pad)`` or, simpler, pass the texts themselves (``model(texts)`` builds the mask). Causal
        models compute right-padded rows' real positions correctly without one; encoders refuse a
        padded batch without a mask. ``to_words`` keeps the token-to-word alignment instead.
        """
        if not isinstance(input, (str, list, tuple)):
            hint = " (decode bytes first: data.decode('utf-8'))" if isinstance(input, (bytes, bytearray)) else ""
            raise TypeError(f"to_tokens: input must be a str or a list of str, got {type(input).__name__}{hint}")
        texts = [input] if isinstance(input, str) else list(input)
        if not texts:
            raise ValueError("empty input: no texts to tokenise")
        side = padding_side or self._require_tokenizer().padding_side
        ids, _ = self._pad(self._token_rows(texts, prepend_bos, truncate), side)
        return ids.to(self.cfg.device) if move_to_device else ids

    def to_str_tokens(
        self, input: str | Sequence[str] | TokenIds, prepend_bos: bool | None = None, padding_side: str | None = None
    ) -> list[str] | list[list[str]]:
        """Each token as the text it decodes to (``" keys"``, not ``"Ġkeys"``), as TransformerLens
        does: a text gives a list, a list of texts a list of lists; token ids [pos] (or [1, pos])
        give a list (``prepend_bos`` and ``padding_side`` then do not apply)."""
        if isinstance(input, (list, tuple)) and not (input and isinstance(input[0], int)):
            return [self.to_str_tokens(item, prepend_bos, padding_side) for item in input]
        if isinstance(input, str):
            ids = self.to_tokens(input, prepend_bos=prepend_bos, padding_side=padding_side, move_to_device=False)[0]
        else:
            ids = torch.as_tensor(input).squeeze()
            if ids.ndim == 0:
                ids = ids[None]
            if ids.ndim != 1:
                raise ValueError(f"to_str_tokens takes one sequence of token ids; got shape {tuple(ids.shape)}")
        hf = self._require_tokenizer().hf
        return hf.batch_decode([[int(t)] for t in ids.tolist()], clean_up_tokenization_spaces=False)

    def to_single_token(self, string: str) -> int:
        """The id of the one token ``string`` is (``" cat"`` on SmolLM2, ``"cat"`` on MiniLM).
        Raises AssertionError, as TransformerLens does, when the string is several tokens."""
        ids = self._require_tokenizer().hf(string, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise AssertionError(
                f"{string!r} is not a single token: it is {len(ids)} tokens {self.to_str_tokens(ids) if ids else []}"
            )
        return int(ids[0])

    def to_single_str_token(self, int_token: int) -> str:
        """The text of one token id (``" Mary"``), as ``to_str_tokens`` writes it."""
        if isinstance(int_token, bool) or not isinstance(int_token, numbers.Integral):
            raise TypeError(f"to_single_str_token takes one token id (an int), got {type(int_token).__name__}")
        return self.to_str_tokens([int(int_token)])[0]

    def get_token_position(
        self,
        single_token: str | int | Tensor,
        input: str | Tensor,
        mode: str = "first",
        prepend_bos: bool | None = None,
        padding_side: str | None = None,
    ) -> int:
        """The position of ``single_token`` (a string of one token, or an id) in ``input`` (a
        text, tokenised as ``to_tokens`` does, or token ids [pos] or [1, pos]): its first
        occurrence, or its last with ``mode="last"``; as TransformerLens's, an AssertionError when
        it does not occur. Positions count from the BOS token when there is one."""
        if mode not in ("first", "last"):
            raise ValueError(f"mode={mode!r}; use 'first' or 'last'")
        tokens = self.to_tokens(input, prepend_bos, padding_side) if isinstance(input, str) else torch.as_tensor(input)
        if tokens.ndim == 2 and tokens.shape[0] == 1:
            tokens = tokens[0]
        if tokens.ndim != 1:
            raise ValueError(f"get_token_position searches one sequence, [pos] or [1, pos]; got {tuple(tokens.shape)}")
        token = self.to_single_token(single_token) if isinstance(single_token, str) else int(single_token)
        where = (tokens == token).nonzero().flatten().tolist()
        if not where:
            raise AssertionError(f"token {token} ({self.to_single_str_token(token)!r}) does not occur in the input")
        return where[0] if mode == "first" else where[-1]

    def to_string(self, tokens: TokenIds) -> str | list[str]:
        """Token ids back to text: [pos] gives a string, [batch, pos] a list of strings."""
        tokens = torch.as_tensor(tokens)
        hf = self._require_tokenizer().hf
        if tokens.ndim == 2:
            return hf.batch_decode(tokens.tolist(), clean_up_tokenization_spaces=False)
        if tokens.ndim <= 1:
            return hf.decode(tokens.reshape(-1).tolist(), clean_up_tokenization_spaces=False)
        raise ValueError(f"to_string takes token ids [pos] or [batch, pos]; got shape {tuple(tokens.shape)}")

    def tokens_to_residual_directions(self, tokens: str | int | Tensor) -> Tensor:
        """The unembedding direction(s) ``W_U[:, token]`` of a token (a string of one token, an id)
        [d_model], or of token ids [...] -> [..., d_model]: what ``ActivationCache.logit_attrs``
        dots the residual stream with. (Not folded with the final norm's weight: as on
        TransformerLens's bridge, combine with ``cache.apply_ln_to_stack``.)"""
        if isinstance(tokens, Tensor) and tokens.numel() > 1:
            return self.W_U[:, tokens].movedim(0, -1)
        if isinstance(tokens, str):
            token = self.to_single_token(tokens)
        elif isinstance(tokens, Tensor):
            token = int(tokens.item())
        else:
            token = int(tokens)
        return self.W_U[:, token]

    # -- forward arguments bound to a token tensor --------------------------------------------------

    @contextmanager
    def inputs_bound(self, tokens: Tensor, **forward_kwargs: Any) -> Iterator[TransformerLensAPI]:
        """Inside the block, every forward call on ``tokens`` (this very tensor) also gets
        ``forward_kwargs`` (e.g. ``attention_mask=``), unless the call passes them itself. For code
        that calls ``model.run_with_hooks(tokens, fwd_hooks=...)`` with tokens only, such as
        ``transformer_lens.patching`` on a padded batch::

            with model.inputs_bound(corrupted, attention_mask=mask):
                patching.get_act_patch_attn_head_out_all_pos(model, corrupted, clean_cache, metric)
        """
        unknown = sorted(set(forward_kwargs) - _BINDABLE)
        if unknown:
            raise TypeError(f"inputs_bound takes forward arguments {sorted(_BINDABLE)}; got {unknown}")
        previous = getattr(self, "_bound_inputs", None)
        self._bound_inputs = (tokens, dict(forward_kwargs))
        try:
            yield self
        finally:
            self._bound_inputs = previous

    def _bound_arguments(
        self,
        tokens: object,
        attention_mask: Tensor | None,
        token_type_ids: Tensor | None,
        return_type: str | None,
        allow_beyond_ctx: bool,
        exact: bool | None,
    ) -> tuple[Tensor | None, Tensor | None, str | None, bool, bool | None]:
        """The forward arguments with those ``inputs_bound`` bound to ``tokens`` (this very object)
        filled in where the call left them at their defaults."""
        bound = getattr(self, "_bound_inputs", None)
        if bound is None or tokens is not bound[0]:
            return attention_mask, token_type_ids, return_type, allow_beyond_ctx, exact
        given = {"attention_mask": attention_mask, "token_type_ids": token_type_ids}
        for key, value in bound[1].items():
            if key in given and given[key] is None:
                given[key] = value
            elif key == "return_type" and return_type == "default":
                return_type = value
            elif key == "allow_beyond_ctx":
                allow_beyond_ctx = allow_beyond_ctx or bool(value)
            elif key == "exact" and exact is None:
                exact = value
        return given["attention_mask"], given["token_type_ids"], return_type, allow_beyond_ctx, exact

    # -- generation: models/generate.py ----------------------------------------------------------

    generate = _generate
