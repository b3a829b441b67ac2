"""Generation: TransformerLens's ``generate`` for the toolkit's causal models, and the ``KVCache``
that keeps each layer's keys and values so that every step runs only the new token, with Hugging
Face's operations (greedy output equals Hugging Face's ``generate`` token for token).

``generate(model, ...)`` is ``model.generate(...)``: the TransformerLens API (``models/tl_api.py``)
binds it as its method. It reads the model through the public parts of that API (``cfg``,
``tokenizer``, ``W_E``, ``forward``) and its tokenising helpers.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

# the model: a ``TransformerLensAPI`` (models/tl_api.py, which imports this module, so not imported here)
_Model = Any

__all__ = ["KVCache", "generate"]


# --------------------------------------------------------------------------------------------------
# Keys and values of earlier tokens, for generation


class _LayerKV:
    """One layer's keys (after RoPE) and values of the tokens seen so far, [batch, kv_head, pos,
    d_head]: what Hugging Face's ``DynamicCache`` holds. Stored in buffers whose capacity doubles
    when full, so that decoding n tokens copies O(n) entries in all (concatenating at every step, as
    ``DynamicCache`` does, copies O(n^2)); ``k`` and ``v`` are views of the filled part. The first
    update (the prompt) is stored at its exact size, so a cache that is never extended costs no more."""

    __slots__ = ("_k", "_v", "n")

    def __init__(self) -> None:
        self._k: Tensor | None = None
        self._v: Tensor | None = None
        self.n = 0  # positions filled

    @property
    def k(self) -> Tensor | None:
        return None if self._k is None else self._k[:, :, : self.n]

    @property
    def v(self) -> Tensor | None:
        return None if self._v is None else self._v[:, :, : self.n]

    def set(self, k: Tensor, v: Tensor) -> None:
        """Hold exactly ``k`` and ``v`` (copies where they are not contiguous)."""
        self._k, self._v, self.n = k.contiguous(), v.contiguous(), k.shape[-2]

    @property
    def capacity(self) -> int:
        return 0 if self._k is None else self._k.shape[-2]

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if self._k is None:
            self.set(k, v)
            return self._k, self._v
        end = self.n + k.shape[-2]
        if end > self.capacity:  # grow geometrically: amortised O(1) copies per new position
            cap = max(end, 2 * self.capacity)
            self._k, self._v = _grown(self._k, self.n, cap), _grown(self._v, self.n, cap)
        self._k[:, :, self.n : end] = k
        self._v[:, :, self.n : end] = v
        self.n = end
        return self.k, self.v


def _grown(buf: Tensor, n: int, cap: int) -> Tensor:
    """A buffer of ``cap`` positions holding ``buf``'s first ``n``."""
    out = buf.new_empty(*buf.shape[:2], cap, buf.shape[-1])
    out[:, :, :n] = buf[:, :, :n]
    return out


class KVCache:
    """The keys and values of every layer for the tokens a causal model has already read, so that
    ``model(new_tokens, past_kv_cache=cache)`` computes only the new positions (what ``generate``
    does; TransformerLens's ``past_kv_cache``). ``mask`` [batch, pos] marks the real tokens seen so
    far (None: all real). Hooks fire on the new positions only."""

    def __init__(self, n_layers: int) -> None:
        self.layers = [_LayerKV() for _ in range(n_layers)]
        self.length = 0
        self.mask: Tensor | None = None

    def repeat(self, copies: int, start: int = 0) -> KVCache:
        """A new cache holding this one's sequences ``copies`` times along the batch (copy i: rows
        i * batch .. (i + 1) * batch - 1, as ``Tensor.repeat`` stacks them), for layers ``start`` and
        up (the layers below are left empty: a run from ``start`` never reads them). This cache is
        not changed."""
        out = KVCache(len(self.layers))
        out.length = self.length
        out.mask = None if self.mask is None else self.mask.repeat(copies, 1)
        for mine, theirs in zip(out.layers[start:], self.layers[start:]):
            if theirs.k is not None:
                mine.set(theirs.k.repeat(copies, 1, 1, 1), theirs.v.repeat(copies, 1, 1, 1))
        return out

    def _extend_mask(self, new: Tensor | None, batch: int, n: int) -> Tensor | None:
        """The key mask over past and new tokens, and remember it (None while every token is real)."""
        if self.mask is None and new is None:
            return None
        device = (self.mask if self.mask is not None else new).device
        past = self.mask if self.mask is not None else torch.ones(batch, self.length, dtype=torch.bool, device=device)
        now = new if new is not None else torch.ones(batch, n, dtype=torch.bool, device=device)
        self.mask = torch.cat([past, now], dim=-1)
        return self.mask


# --------------------------------------------------------------------------------------------------
# generate


@torch.no_grad()
def generate(
    model: _Model,
    input: str | Sequence[str] | Tensor = "",
    max_new_tokens: int = 10,
    stop_at_eos: bool = True,
    eos_token_id: int | Sequence[int] | None = None,
    do_sample: bool = True,
    top_k: int | None = None,
    top_p: float | None = None,
    temperature: float = 1.0,
    freq_penalty: float = 0.0,
    use_past_kv_cache: bool = True,
    prepend_bos: bool | None = None,
    padding_side: str | None = None,
    return_type: str | None = "input",
    verbose: bool = False,
    attention_mask: Tensor | None = None,
) -> str | list[str] | Tensor:
    """TransformerLens's ``generate``: continue a text, a list of texts or token ids [batch, pos]
    by up to ``max_new_tokens`` tokens (causal models with an LM head).

    Greedy when ``do_sample=False`` or ``temperature=0``; otherwise samples with
    TransformerLens's own ``sample_logits`` (``top_k``, ``top_p``, ``temperature``,
    ``freq_penalty``; seed with ``torch.manual_seed``). With ``stop_at_eos`` a sequence stops
    at the EOS token (``eos_token_id``, default the model's) and is padded after it; the loop
    ends when every sequence has stopped. ``use_past_kv_cache`` (default) keeps each layer's
    keys and values (``KVCache``) and runs only the new token per step, the way Hugging Face's
    ``generate`` does: greedy output equals Hugging Face's token for token. Without it every
    step reruns the whole sequence. Texts are tokenised as ``to_tokens`` does (same BOS
    default), several texts left-padded with a mask; token ids may come with
    ``attention_mask``. ``return_type``: "input" (text in, text out; ids in, ids out), "str"
    or "tokens" (prompt and continuation, [batch, pos]). ``verbose`` is accepted and ignored
    (the toolkit prints nothing). Hooks attached with ``model.hooks(...)`` fire at every step.

    The arguments are checked before any forward pass: ``max_new_tokens`` and ``top_k`` whole
    numbers (>= 0, >= 1), ``temperature`` finite and >= 0, ``top_p`` in (0, 1],
    ``freq_penalty`` finite; a generation that would read more than ``n_ctx`` tokens is
    refused up front, not after the steps that fit.
    """
    cfg = model.cfg
    if not (cfg.is_causal and cfg.lm_head):
        raise ValueError(f"generate needs a causal model with an LM head; {cfg.name!r} is not one")
    if return_type not in ("input", "str", "tokens"):
        raise ValueError(f"return_type={return_type!r}; use 'input', 'str' or 'tokens'")
    _check_generation_arguments(max_new_tokens, top_k, top_p, temperature, freq_penalty)
    tokens, mask, kind = _prompt_tokens(model, input, attention_mask, prepend_bos, padding_side)
    _check_room(model, tokens.shape[1], max_new_tokens)
    eos, pad = _eos_and_pad(model, eos_token_id, stop_at_eos)
    if not do_sample or temperature == 0.0:
        pick: Callable[[Tensor, Tensor], Tensor] = lambda logits, tokens: logits.argmax(dim=-1)  # noqa: E731
    else:
        from transformer_lens.utilities import sample_logits

        def pick(logits: Tensor, tokens: Tensor) -> Tensor:
            return sample_logits(
                logits, top_k=top_k, top_p=top_p, temperature=temperature, freq_penalty=freq_penalty, tokens=tokens
            )

    use_cache = use_past_kv_cache and cfg.positional != "alibi"
    tokens = _continue(model, tokens, mask, max_new_tokens, pick, eos if stop_at_eos else None, pad, use_cache)
    if return_type == "tokens" or (return_type == "input" and kind == "tokens"):
        return tokens
    hf = model._require_tokenizer().hf
    texts = [hf.decode(row.tolist(), skip_special_tokens=True) for row in tokens]
    return texts[0] if isinstance(input, str) else texts


def _prompt_tokens(
    model: _Model,
    input: str | Sequence[str] | Tensor,
    attention_mask: Tensor | None,
    prepend_bos: bool | None,
    padding_side: str | None,
) -> tuple[Tensor, Tensor | None, str]:
    """The prompt as token ids [batch, pos] on the model's device, its mask (None: no padding)
    and what it came as ("str" or "tokens")."""
    device = model.W_E.device
    if isinstance(input, str) or (isinstance(input, (list, tuple)) and input and isinstance(input[0], str)):
        texts = [input] if isinstance(input, str) else list(input)
        # left padding: every row's last real token is the last position
        tokens, mask = model._pad(model._token_rows(texts, prepend_bos, truncate=False), padding_side or "left")
        if padding_side == "right" and len(set(mask.sum(-1).tolist())) > 1:
            raise ValueError("generate continues every row from its last position: pad several texts on the left")
        kind = "str"
    else:
        tokens = torch.as_tensor(input)
        tokens = tokens[None] if tokens.ndim == 1 else tokens
        mask = attention_mask
        kind = "tokens"
    tokens = tokens.to(device)
    mask = None if mask is None else torch.as_tensor(mask, device=device).bool()
    if mask is not None and mask.all():
        mask = None
    return tokens, mask, kind


def _check_room(model: _Model, n_prompt: int, max_new_tokens: int) -> None:
    """Refuse, before any forward pass, a generation that would make the model read past n_ctx
    (the last new token is never read back, hence the - 1)."""
    n_ctx, reads = model.cfg.n_ctx, n_prompt + max_new_tokens - 1
    if max_new_tokens and reads > n_ctx:
        fix = f"use max_new_tokens <= {n_ctx - n_prompt + 1}" if n_prompt <= n_ctx else "shorten the prompt"
        raise ValueError(
            f"generate: a prompt of {n_prompt} tokens and max_new_tokens={max_new_tokens} would make the model "
            f"read {reads} tokens, more than the context of {model.cfg.name!r} (n_ctx={n_ctx}); {fix}"
        )


def _eos_and_pad(model: _Model, eos_token_id: int | Sequence[int] | None, stop_at_eos: bool) -> tuple[Tensor, int]:
    """The EOS ids [n] (the model's by default) and the id written after a sequence stopped."""
    if eos_token_id is None:
        eos_token_id = model.cfg.eos_token_id
        if eos_token_id is None and model.tokenizer is not None:
            eos_token_id = model.tokenizer.hf.eos_token_id
    if stop_at_eos and eos_token_id is None:
        raise ValueError("stop_at_eos=True but the model has no EOS token; pass eos_token_id or stop_at_eos=False")
    eos = torch.as_tensor(
        [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id or []), device=model.W_E.device
    )
    pad = model.tokenizer.pad_token_id if model.tokenizer is not None else int(eos[0]) if len(eos) else 0
    return eos, pad


def _continue(
    model: _Model,
    tokens: Tensor,
    mask: Tensor | None,
    max_new_tokens: int,
    pick: Callable[[Tensor, Tensor], Tensor],
    eos: Tensor | None,
    pad: int,
    use_cache: bool,
) -> Tensor:
    """The generation loop: ``tokens`` [batch, pos] and up to ``max_new_tokens`` more, each the
    ``pick`` of the last position's logits; a row that produced an ``eos`` id (None: never
    stop) is padded with ``pad`` from then on, and the loop ends when every row has stopped."""
    cache = KVCache(model.cfg.n_layers) if use_cache else None
    finished = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    step_tokens, step_mask = tokens, mask
    scaling = dict(model.cfg.rope_scaling or ())
    switch = scaling.get("original_max_position_embeddings") if scaling.get("rope_type") == "longrope" else None
    for _ in range(max_new_tokens):
        if cache is not None and switch is not None and tokens.shape[1] > switch >= cache.length > 0:
            # LongRoPE switches to its long factors once the sequence passes the original length: the
            # cached keys were rotated with the short ones, so rebuild the cache from the whole sequence
            # (Hugging Face's Phi-3 drops its cache at this point too)
            cache, step_tokens, step_mask = KVCache(model.cfg.n_layers), tokens, mask
        if cache is not None:
            hidden = model(step_tokens, attention_mask=step_mask, return_type="hidden", past_kv_cache=cache)
        else:
            hidden = model(tokens, attention_mask=mask, return_type="hidden")
        logits = model._unembed(hidden[:, -1:, :])[:, -1]  # the last position only, as HF does
        new = pick(logits, tokens)
        if eos is not None:
            new = torch.where(finished, torch.full_like(new, pad), new)
            finished |= torch.isin(new, eos)
        tokens = torch.cat([tokens, new[:, None]], dim=1)
        if mask is not None:
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        step_tokens, step_mask = new[:, None], None
        if eos is not None and bool(finished.all()):
            break
    return tokens


def _whole(name: str, value: object, least: int, meaning: str) -> None:
    """``value`` must be an int (not a bool) >= ``least``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"generate: {name} must be a whole number >= {least}{meaning}, got {value!r} ({type(value).__name__})"
        )
    if value < least:
        raise ValueError(f"generate: {name} must be a whole number >= {least}{meaning}, got {value}")


def _real(name: str, value: object, accepted: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"generate: {name} must be {accepted}, got {value!r} ({type(value).__name__})")
    return float(value)


def _check_generation_arguments(
    max_new_tokens: object, top_k: object, top_p: object, temperature: object, freq_penalty: object
) -> None:
    """TypeError/ValueError naming the argument and what it accepts (TransformerLens's
    ``sample_logits`` would fail with a bare assertion, or sample from a wrong distribution: a
    negative temperature inverts it)."""
    _whole("max_new_tokens", max_new_tokens, 0, "")
    accepted = "a finite number >= 0 (0: greedy)"
    if not (math.isfinite(t := _real("temperature", temperature, accepted)) and t >= 0):
        raise ValueError(f"generate: temperature must be {accepted}, got {temperature}")
    if top_k is not None:
        _whole("top_k", top_k, 1, " (or None: no top-k cut)")
    if top_p is not None:
        accepted = "a number in (0, 1] (or None: no nucleus cut)"
        if not 0 < _real("top_p", top_p, accepted) <= 1:
            raise ValueError(f"generate: top_p must be {accepted}, got {top_p}")
    accepted = "a finite number (0: no penalty)"
    if not math.isfinite(_real("freq_penalty", freq_penalty, accepted)):
        raise ValueError(f"generate: freq_penalty must be {accepted}, got {freq_penalty}")
