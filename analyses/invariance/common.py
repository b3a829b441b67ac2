"""Shared pieces of the invariance checks: error metrics, tolerances, rows, inputs, random matrices.

Every check produces rows with the columns of ``ROW_COLUMNS``. ``expected`` is ``"holds"`` for an
invariance (the measured difference must stay within the tolerance) and ``"breaks"`` for a negative
control (it must exceed the tolerance). ``baseline`` is the guard against a model that ignores its
input: the same metric between the reference and a run on a *different* input (or with the
permutation/shift not undone); an invariance only passes when the baseline is far (``GUARD`` times)
above the tolerance, so a constant function cannot pass.

Tolerances come in two kinds, both stated in the ``tolerance_rule`` column:

* **a-priori bounds** (``gamma``): the standard floating-point model ``fl(a op b) = (a op b)(1+d)``,
  ``|d| <= u`` gives ``|fl(x.y) - x.y| <= gamma_n |x|.|y|`` with ``gamma_n = n u / (1 - n u)``
  (Higham, *Accuracy and Stability of Numerical Algorithms*, sec. 3.1); each check states its
  derivation where it uses one;
* **measured round-off floors** (``floor``): for a deep computation an a-priori bound is uselessly
  loose, so the fp32 computation's own forward error is measured against the same computation in
  fp64, ``floor = relerr(f32(x), f64(x))``. Two fp32 computations that are equal in exact arithmetic
  differ by at most the sum of their forward errors, each of the order of ``floor`` (an orthogonal
  change of basis or a permutation does not change the conditioning), so the tolerance is
  ``SAFETY * floor``; for fp64 runs the floor is scaled by the ratio of unit round-offs
  ``u64 / u32 = 2^-29``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from interp.names import act_name
from interp.view import view

U32 = 2.0**-24  # unit round-off of IEEE single precision
U64 = 2.0**-53  # ... and double
SAFETY = 10.0  # measured-floor tolerance = SAFETY * floor (one order of magnitude of headroom)
GUARD = 10.0  # an invariance passes only if the baseline is GUARD times above the tolerance

ROW_COLUMNS = [
    "model",
    "check",
    "quantity",
    "value",
    "tolerance",
    "expected",
    "passed",
    "baseline",
    "dtype",
    "tolerance_rule",
    "detail",
]

DEFAULT_TEXT = "The old man who lives by the river reads a long book to the children every night."


def unit_roundoff(dtype: torch.dtype) -> float:
    if dtype == torch.float64:
        return U64
    if dtype == torch.float32:
        return U32
    raise ValueError(f"unit round-off is defined here for float32/float64, got {dtype}")


def floor_at_least_u(floor: float, model) -> float:
    """A measured round-off floor, never below one unit round-off of the model's dtype (when the
    model is itself fp64, the fp64 reference cannot see its round-off and measures 0)."""
    return max(float(floor), unit_roundoff(next(model.parameters()).dtype))


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n u / (1 - n u), the relative bound of an n-term inner product."""
    if n * u >= 1:
        raise ValueError(f"gamma_n undefined for n*u={n * u} >= 1")
    return n * u / (1 - n * u)


def relerr(a: Tensor, b: Tensor) -> float:
    """max |a - b| / max |b| over entries finite in both (masked scores are -inf in both)."""
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    if a.shape != b.shape:
        raise ValueError(f"relerr: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}")
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(fa, fb):  # a masked entry in one and not in the other is an infinite error
        return math.inf
    if not fa.any():
        raise ValueError("relerr: no finite entries to compare")
    diff = (a[fa] - b[fb]).abs().max().item()
    scale = b[fb].abs().max().item()
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def judge(value: float, tolerance: float, expected: str, baseline: float = math.nan) -> bool:
    """holds: value <= tolerance and (no baseline, or baseline > GUARD * tolerance);
    breaks: value > tolerance."""
    if expected == "holds":
        ok = value <= tolerance
        if not math.isnan(baseline):
            ok = ok and baseline > GUARD * tolerance
        return bool(ok)
    if expected == "breaks":
        return bool(value > tolerance)
    raise ValueError(f"expected must be 'holds' or 'breaks', got {expected!r}")


def make_row(
    model: str,
    check: str,
    quantity: str,
    value: float,
    tolerance: float,
    expected: str,
    *,
    baseline: float = math.nan,
    dtype: str = "float32",
    rule: str = "",
    detail: str = "",
) -> dict:
    value, tolerance, baseline = float(value), float(tolerance), float(baseline)
    return dict(
        model=model,
        check=check,
        quantity=quantity,
        value=value,
        tolerance=tolerance,
        expected=expected,
        passed=judge(value, tolerance, expected, baseline),
        baseline=baseline,
        dtype=dtype,
        tolerance_rule=rule,
        detail=detail,
    )


# -- random matrices -------------------------------------------------------------------------------


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def random_orthogonal(n: int, gen: torch.Generator) -> Tensor:
    """A Haar-random orthogonal matrix [n, n] in float64: QR of a Gaussian with the signs of R's
    diagonal moved into Q (without the sign fix QR's convention biases the distribution)."""
    g = torch.randn(n, n, generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    return q * torch.sign(torch.diagonal(r))[None, :]


def random_invertible(n: int, cond: float, gen: torch.Generator) -> Tensor:
    """U diag(s) V^T with random orthogonal U, V and singular values log-spaced from 1 to ``cond``
    (so cond_2(A) = cond exactly, up to round-off), float64."""
    if cond < 1:
        raise ValueError(f"a condition number is >= 1, got {cond}")
    u, v = random_orthogonal(n, gen), random_orthogonal(n, gen)
    s = torch.logspace(0, math.log10(cond), n, dtype=torch.float64) if n > 1 else torch.ones(1, dtype=torch.float64)
    return u @ torch.diag(s) @ v.T


def random_permutation(n: int, gen: torch.Generator, fixed: Sequence[int] = ()) -> Tensor:
    """A random permutation of range(n) that moves at least two of the free positions and keeps
    ``fixed`` (e.g. [CLS]/[SEP]) in place."""
    free = [i for i in range(n) if i not in set(fixed)]
    if len(free) < 2:
        raise ValueError(f"need at least two movable positions to permute, got {len(free)} of {n}")
    perm = torch.arange(n)
    while True:
        shuffled = torch.tensor(free)[torch.randperm(len(free), generator=gen)]
        if not torch.equal(shuffled, torch.tensor(free)):
            break
    perm[torch.tensor(free)] = shuffled
    return perm


def inverse_permutation(perm: Tensor) -> Tensor:
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(len(perm))
    return inv


# -- models and inputs -----------------------------------------------------------------------------


def double_copy(model):
    """An fp64 copy (the loaded model is never changed)."""
    return copy.deepcopy(model).double()


def model_tokens(model, text: str | None = None, n_tokens: int = 16, seed: int = 0) -> Tensor:
    """Token ids [1, pos] for one sequence: ``text`` tokenised with the model's tokenizer (cut to
    ``n_tokens`` while keeping a final special token such as [SEP]), or seeded random ids when the
    model has no tokenizer. An empty or blank ``text``, or a ``text`` for a model without a
    tokenizer, is a ValueError (not a silent fall-back to another input)."""
    if text is not None and not text.strip():
        raise ValueError("the text is empty; give a sentence, or None for the default one")
    if text is not None and getattr(model, "tokenizer", None) is None:
        raise ValueError(f"{view(model).name} has no tokenizer, so it cannot read a text; pass text=None")
    if getattr(model, "tokenizer", None) is not None:
        batch = model.to_words([text or DEFAULT_TEXT])
        ids = batch.input_ids[0][batch.attention_mask[0].bool()]
        if len(ids) > n_tokens:
            special_last = int(batch.token_to_word[0][len(ids) - 1]) == -1
            ids = torch.cat([ids[: n_tokens - 1], ids[-1:]]) if special_last else ids[:n_tokens]
        return ids[None].long()
    n = min(n_tokens, model.cfg.n_ctx)
    return torch.randint(0, model.cfg.d_vocab, (1, n), generator=generator(seed))


def within_windows(model, tokens: Tensor) -> Tensor:
    """``tokens`` [1, pos] cut to the shortest sliding window of ``model`` where the input is longer:
    within it every layer sees every earlier token, as the order checks' premises need (a shuffled
    prefix would otherwise move tokens in and out of a window). Unchanged without windows."""
    cfg = model.cfg
    windows = [w for l in range(cfg.n_layers) if (w := cfg.window(l)) is not None]
    return tokens[:, : min(windows)] if windows and tokens.shape[1] > min(windows) else tokens


def special_positions(model, tokens: Tensor) -> list[int]:
    """Positions of special tokens ([CLS], [SEP], <s>) in ``tokens`` [1, pos], kept fixed when
    shuffling text so that the shuffled input is still a plausible input."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return []
    hf = getattr(tok, "hf", None)
    specials = set(int(i) for i in getattr(hf, "all_special_ids", []) or [])
    return [i for i, t in enumerate(tokens[0].tolist()) if t in specials]


def different_tokens(model, tokens: Tensor, seed: int = 1, keep: Sequence[int] = ()) -> Tensor:
    """The same length, other tokens (positions in ``keep`` unchanged): the guard input."""
    gen = generator(seed)
    other = tokens.clone()
    lo = 1000 if model.cfg.d_vocab > 3000 else 0  # avoid special / byte tokens of real vocabularies
    hi = min(model.cfg.d_vocab, 20000) if model.cfg.d_vocab > 3000 else model.cfg.d_vocab
    new = torch.randint(lo, hi, tokens.shape, generator=gen)
    mask = torch.ones(tokens.shape[1], dtype=torch.bool)
    mask[list(keep)] = False
    other[:, mask] = new[:, mask]
    return other


def attn_input_hook(cfg, layer: int) -> str:
    """The hook whose value is the attention layer's input: the residual itself (``hook_resid_pre``)
    where no norm sits before attention (post-norm, whose norms follow the residual sum; reordered,
    OLMo-2, which has no ln1 and normalises the sublayer outputs instead; ModernBERT's block 0, whose
    embedding norm stands in for ln1), else ln1's output (pre-norm,
    and Gemma's sandwich norms, ln1 before and ln1_post after attention)."""
    if cfg.norm_placement in ("post", "reordered") or (layer == 0 and not cfg.first_attn_norm):
        return act_name(layer, "hook_resid_pre")  # ModernBERT's block 0 has no ln1 either
    return act_name(layer, "ln1.hook_normalized")


def attention_inputs(model, tokens: Tensor) -> list[Tensor]:
    names = [attn_input_hook(model.cfg, l) for l in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=names, return_type=None)
    return [cache[n].detach() for n in names]


def layer_call(model, layer: int, x: Tensor, *, causal: bool, rope: bool, positions: Tensor | None = None):
    """Call attention layer ``layer`` directly on its input ``x`` [batch, pos, d_model], choosing
    the mask and whether RoPE is applied; positions default to 0..pos-1."""
    if rope and model.cfg.positional != "rope":
        raise ValueError(f"model {view(model).name!r} has {model.cfg.positional} positions, not RoPE")
    attn = model.blocks[layer].attn
    window = getattr(attn, "window", None)
    if causal or window is None or not model.cfg.is_causal:  # an encoder's window is bidirectional: kept
        return model.attention_layer(layer, x, positions=positions, causal=causal, rope=rope)
    # A sliding-window layer (Gemma 3) called without the causal mask: the model builds no window
    # mask for a non-causal call, and an input no longer than the window has no key out of reach,
    # so the layer runs as a full one for the call (its module's window is restored afterwards).
    if x.shape[1] > window:
        raise ValueError(f"layer {layer} slides over {window} tokens; a non-causal call needs at most that many")
    try:
        attn.window = None
        return model.attention_layer(layer, x, positions=positions, causal=causal, rope=rope)
    finally:
        attn.window = window


def tiny_model(positional: str, attention: str = "bidirectional", seed: int = 0, **kw):
    """A seeded small model for encodings the real models lack (weights N(0, 0.02) are too small to
    make attention interesting, so Q/K are scaled up to give O(1) scores)."""
    import models

    base = dict(
        d_model=64,
        n_layers=2,
        n_heads=4,
        d_head=16,
        d_mlp=128,
        d_vocab=100,
        n_ctx=2048,
        attention=attention,
        positional=positional,
        name=f"tiny-{positional}",
    )
    base.update(kw)
    m = models.Transformer(models.Config(**base), seed=seed).eval()
    with torch.no_grad():
        for block in m.blocks:
            block.attn.q_weight.mul_(10.0)
            block.attn.k_weight.mul_(10.0)
    return m


def as_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def first_layers(model, n_layers: int):
    """A new model made of the first ``n_layers`` blocks of ``model`` (same real weights, same
    embeddings, final norm and tokenizer): a fast stand-in for layer-wise checks. ``model`` is not
    changed."""
    import models

    if not 1 <= n_layers <= model.cfg.n_layers:
        raise ValueError(f"n_layers must lie in 1..{model.cfg.n_layers}, got {n_layers}")
    cfg = model.cfg.replace(n_layers=n_layers, name=f"{model.cfg.name}[:{n_layers}]")
    new = models.Transformer(cfg, tokenizer=getattr(model, "tokenizer", None), seed=0)
    keep = {
        k: v for k, v in model.state_dict().items() if not k.startswith("blocks.") or int(k.split(".")[1]) < n_layers
    }
    new.load_state_dict(keep, strict=True)
    return new.to(next(model.parameters()).dtype).eval()
