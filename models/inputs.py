"""Preparing ``Transformer.forward``'s inputs: binding, tokenising text, shaping to [batch, pos] and
refusing bad input with a message that names what was wrong and what would be right. Every refusal
happens here, before the first embedding; ``models/transformer.py`` then reads as the model alone.
A mixin ``Transformer`` inherits; it reads ``self.cfg``, ``self.tokenizer``, ``self.W_E``,
``self.exact`` and ``self._bound_arguments`` (``models/tl_api.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import Tensor

from models.tokenizer import NO_TOKENIZER

if TYPE_CHECKING:
    from models.tl_api import KVCache, TokenIds
    from models.tokenizer import Text, Tokenizer

__all__: list[str] = []


class _Inputs(NamedTuple):
    """``forward``'s inputs once prepared: tokens [batch, pos], the bool mask (None: no padding),
    token types (None: all 0), what to return, which attention path, and the earlier tokens a
    ``KVCache`` holds."""

    tokens: Tensor
    attention_mask: Tensor | None
    token_type_ids: Tensor | None
    return_type: str | None
    exact: bool
    past: int


def _is_text(x: object) -> bool:
    """A str, a list of str (texts), or a list of lists of str (word lists): not token ids."""
    if isinstance(x, str):
        return True
    if isinstance(x, (list, tuple)) and x:
        first = x[0]
        return isinstance(first, str) or (
            isinstance(first, (list, tuple)) and bool(first) and isinstance(first[0], str)
        )
    return False


class InputPreparation:
    """``_prepare_inputs`` and the checks it runs (see the module docstring)."""

    def _require_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise ValueError(f"model {self.cfg.name!r} {NO_TOKENIZER}")
        return self.tokenizer

    def _prepare_inputs(
        self,
        tokens: TokenIds | Text | Sequence[Text],
        attention_mask: Tensor | None,
        token_type_ids: Tensor | None,
        return_type: str | None,
        allow_beyond_ctx: bool,
        past_kv_cache: KVCache | None,
        exact: bool | None,
    ) -> _Inputs:
        """``forward``'s arguments bound (``inputs_bound``), tokenised (text), shaped to [batch, pos]
        on the model's device and checked: every refusal of bad input happens here, before the
        first embedding."""
        attention_mask, token_type_ids, return_type, allow_beyond_ctx, exact = self._bound_arguments(
            tokens, attention_mask, token_type_ids, return_type, allow_beyond_ctx, exact
        )
        self._check_return_type(return_type)
        if _is_text(tokens):
            tokens, attention_mask, token_type_ids = self._tokenise_input(tokens, attention_mask, token_type_ids)
        tokens = torch.as_tensor(tokens)
        if tokens.ndim == 1:
            tokens = tokens[None]
            if attention_mask is not None and torch.as_tensor(attention_mask).ndim == 1:
                attention_mask = torch.as_tensor(attention_mask)[None]
            if token_type_ids is not None and torch.as_tensor(token_type_ids).ndim == 1:
                token_type_ids = torch.as_tensor(token_type_ids)[None]
        past = 0 if past_kv_cache is None else self._check_cache(past_kv_cache, tokens)
        self._check_tokens(tokens, allow_beyond_ctx, past)
        device = self.W_E.device
        if token_type_ids is not None:
            token_type_ids = self._check_token_types(torch.as_tensor(token_type_ids, device=device), tokens)
        if attention_mask is not None:
            attention_mask = self._check_mask(torch.as_tensor(attention_mask, device=device), tokens, past_kv_cache)
        elif not self.cfg.is_causal:
            self._check_unmasked_padding(tokens)
        exact = self.exact if exact is None else bool(exact)
        return _Inputs(tokens, attention_mask, token_type_ids, return_type, exact, past)

    def _check_return_type(self, return_type: str | None) -> None:
        if return_type not in ("default", "logits", "hidden", "loss", "both", None):
            raise ValueError(f"return_type={return_type!r}; use 'logits', 'hidden', 'loss', 'both', 'default' or None")
        if return_type in ("logits", "loss", "both") and not self.cfg.lm_head:
            raise ValueError(f"model {self.cfg.name!r} is an encoder without an LM head; use return_type='hidden'")
        if return_type in ("loss", "both") and not self.cfg.is_causal:
            raise ValueError(f"return_type={return_type!r} is next-token cross-entropy; it needs a causal model")

    def _tokenise_input(
        self, text: Text | Sequence[Text], attention_mask: Tensor | None, token_type_ids: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Text tokenised as ``to_words`` does: ids, mask and token types, none of them given."""
        for given, what in ((attention_mask, "attention_mask"), (token_type_ids, "token_type_ids")):
            if given is not None:
                raise ValueError(
                    f"{what}= was given with text input, whose {what} the tokenizer builds; to pass your own, "
                    f"pass token ids instead: batch = model.to_words(text); model(batch.input_ids, {what}=...)"
                )
        batch = self.to_words(text)
        return batch.input_ids, batch.attention_mask, batch.token_type_ids

    def _check_cache(self, cache: KVCache, tokens: Tensor) -> int:
        """The number of earlier tokens ``cache`` holds, once it is known to fit this model and batch."""
        if not self.cfg.is_causal:
            raise ValueError("past_kv_cache continues a causal model's sequences; this model is bidirectional")
        if self.cfg.positional == "alibi":
            raise NotImplementedError("past_kv_cache is not implemented for ALiBi positions; run the whole sequence")
        held = next((layer.k.shape[0] for layer in cache.layers if layer.k is not None), None)
        if cache.length and held is not None and held != tokens.shape[0]:
            raise ValueError(f"past_kv_cache holds {held} sequences, tokens {tokens.shape[0]}")
        return cache.length

    def _check_tokens(self, tokens: Tensor, allow_beyond_ctx: bool, past: int = 0) -> None:
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [batch, pos] or [pos], got shape {tuple(tokens.shape)}")
        if tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(f"empty input: tokens have shape {tuple(tokens.shape)}; need at least one token")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or hi >= self.cfg.d_vocab:
            raise ValueError(f"token ids must lie in 0..{self.cfg.d_vocab - 1}, got min {lo} and max {hi}")
        n, cfg = tokens.shape[1] + past, self.cfg
        if n > cfg.n_ctx and (cfg.positional == "learned" or not allow_beyond_ctx):
            if cfg.positional == "learned":
                extra = "; learned absolute positions have no embedding past n_ctx"
            else:
                extra = "; pass allow_beyond_ctx=True to run past the trained context anyway"
            raise ValueError(
                f"sequence of {n} tokens is longer than the context of {self.cfg.name!r} "
                f"(n_ctx={self.cfg.n_ctx}){extra}; truncate or split the input"
            )

    def _check_token_types(self, token_type_ids: Tensor, tokens: Tensor) -> Tensor:
        if tuple(token_type_ids.shape) != tuple(tokens.shape):
            raise ValueError(
                f"token_type_ids has shape {tuple(token_type_ids.shape)}, tokens {tuple(tokens.shape)}; they must match"
            )
        if token_type_ids.is_floating_point() or token_type_ids.is_complex() or token_type_ids.dtype == torch.bool:
            raise TypeError(f"token_type_ids must be integer ids, got dtype {token_type_ids.dtype}")
        n_types = self.cfg.n_token_types
        lo, hi = int(token_type_ids.min()), int(token_type_ids.max())
        if n_types == 0 and (lo != 0 or hi != 0):
            raise ValueError(
                f"model {self.cfg.name!r} has no token types, so token_type_ids must be all 0 (or None); "
                f"got min {lo} and max {hi}"
            )
        if n_types and (lo < 0 or hi >= n_types):
            raise ValueError(
                f"token_type_ids must lie in 0..{n_types - 1} (model {self.cfg.name!r} has {n_types} token types), "
                f"got min {lo} and max {hi}"
            )
        return token_type_ids.long()

    def _pad_id(self) -> int | None:
        """The padding id an encoder must not read as a token (cfg, else the tokenizer's)."""
        if self.cfg.pad_token_id is not None:
            return self.cfg.pad_token_id
        return None if self.tokenizer is None else getattr(self.tokenizer.hf, "pad_token_id", None)

    def _check_mask(self, attention_mask: Tensor, tokens: Tensor, past_kv_cache: KVCache | None) -> Tensor | None:
        """The mask as bool [batch, pos], or None when nothing is padded (the unmasked path)."""
        if attention_mask.shape != tokens.shape:
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}, tokens {tuple(tokens.shape)}; they must match"
            )
        if attention_mask.dtype != torch.bool and not ((attention_mask == 0) | (attention_mask == 1)).all():
            raise ValueError(
                "attention_mask must hold only 1 (real token) and 0 (padding), got values "
                f"{sorted(set(attention_mask.unique().tolist()))[:6]}"
            )
        attention_mask = attention_mask.bool()
        if past_kv_cache is None and not attention_mask.any(-1).all():
            raise ValueError("attention_mask marks a sequence with no real token (an all-zero row)")
        return None if attention_mask.all() else attention_mask

    def _check_unmasked_padding(self, tokens: Tensor) -> None:
        """Padding sits at an end of a row; a bidirectional model given no mask would attend to it."""
        pad = self._pad_id()
        if pad is None:
            return
        edges = (tokens[:, 0] == pad) | (tokens[:, -1] == pad)
        if bool(edges.any()):
            row = int(edges.nonzero()[0])
            raise ValueError(
                f"row {row} of the tokens starts or ends with the padding id {pad}, and no attention_mask was "
                f"given: this bidirectional model would attend to the padding. Pass attention_mask (e.g. "
                f"tokens != {pad}; all ones if the id really is text), or pass the texts themselves"
            )
