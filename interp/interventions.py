"""Interventions on attention heads through the hooks: ablation and activation patching.

Everything acts on ``blocks.{layer}.attn.hook_z`` ``[batch, pos, head, d_head]``, one head's
pattern-weighted values just before ``W_O``. That is the last place where heads are separate in
every model that exposes TransformerLens hook names, and for grouped-query attention it is per
*query* head (key/value heads are shared by several query heads; ablating ``hook_v`` would ablate a
whole group).

Three ablations, each a replacement of the head's ``z``:

* ``zero``: ``z = 0`` (the head writes nothing, or only ``b_O``'s share, which belongs to no head);
* ``mean``: ``z`` = its mean over every real (unpadded) token of a reference batch, a ``[d_head]``
  vector per head: the head still writes its typical output but nothing that depends on the input;
* ``resample``: ``z`` taken from another prompt of the same group (same template family, same length
  where possible), chosen by a seeded derangement.

Single-head sweeps (one forward pass per head over the whole batch) run through
``transformer_lens.patching.generic_activation_patch`` with its ``layer_head_vector_patch_setter``:
an ablation is activation patching where the "clean cache" holds the replacement values. Patching
proper (clean activations into a corrupted run) is the same call with the clean run's ``hook_z``.
TransformerLens's function takes the model itself (it reads ``model.cfg.n_layers / n_heads /
n_key_value_heads / device``, which our ``Config`` provides under those names). It calls
``model.run_with_hooks(tokens, fwd_hooks=...)`` with the tokens only, so a padded batch's
attention mask (and any other forward argument) is bound to the tokens for the duration of the
sweep: ``model.inputs_bound(tokens, attention_mask=...)`` on our models; on a model without it (a
TransformerLens bridge) a private stand-in passes the arguments on.

Sets of heads (several layers at once) use ``ablated(...)`` / ``run_ablated(...)``, which attach one
hook per layer inside ``model.hooks(...)``: removed when the block exits, also on an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from interp.names import act_name, layer_of
from interp.view import view as model_view

if TYPE_CHECKING:
    from transformer_lens.hook_points import HookPoint

__all__ = [
    "ABLATIONS",
    "z_name",
    "normalize_heads",
    "all_heads",
    "cache_z",
    "ablation_source",
    "ablation_hooks",
    "replace_all",
    "replace_stacked",
    "ablated",
    "run_ablated",
    "head_sweep",
    "patch_heads",
    "head_table",
    "patching_table",
    "plot_head_table",
    "MIN_GAP",
]

ABLATIONS = ("zero", "mean", "resample")
Head = tuple[int, int]
# what ``normalize_heads`` accepts: (layer, head) pairs, one pair, or a DataFrame with those columns
HeadsLike: TypeAlias = Head | Iterable[Head] | pd.DataFrame
# token ids [batch, pos] or an attention mask [batch, pos] (1 real, 0 padding), in any form
# ``torch.as_tensor`` takes
IdsLike: TypeAlias = Tensor | np.ndarray | Sequence[int] | Sequence[Sequence[int]]
# A model: the toolkit's ``models.Transformer``, a TransformerLens bridge, or anything else with
# TransformerLens's hook API (``run_with_hooks``, ``run_with_cache``, ``hooks``) and a ``cfg`` that
# ``interp.view.view`` reads. ``interp`` does not import ``models``, so this is ``Any``.
Model: TypeAlias = Any


def z_name(layer: int) -> str:
    return act_name(layer, "attn.hook_z")


def _n_layers_heads(model: Model) -> tuple[int, int]:
    v = model_view(model)
    return v.n_layers, v.n_heads


def all_heads(model: Model) -> list[Head]:
    n_layers, n_heads = _n_layers_heads(model)
    return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]


def normalize_heads(model: Model, heads: HeadsLike) -> list[Head]:
    """``heads`` as a list of (layer, head) int pairs, checked against the model's shape.
    Accepts pairs, a single pair, or a DataFrame with ``layer`` and ``head`` columns."""
    if isinstance(heads, pd.DataFrame):
        heads = list(zip(heads["layer"], heads["head"]))
    elif isinstance(heads, tuple) and len(heads) == 2 and all(isinstance(x, (int, np.integer)) for x in heads):
        heads = [heads]
    n_layers, n_heads = _n_layers_heads(model)
    out = []
    for pair in heads:
        layer, head = (int(x) for x in pair)
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"head ({layer}, {head}) does not exist: the model has layers 0..{n_layers - 1} "
                f"and heads 0..{n_heads - 1} per layer"
            )
        out.append((layer, head))
    return out


def _mask_or_none(tokens: Tensor, attention_mask: IdsLike | None) -> Tensor | None:
    if attention_mask is None:
        return None
    mask = torch.as_tensor(attention_mask)
    if mask.shape != tokens.shape:
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)}, tokens {tuple(tokens.shape)}; they must match")
    return mask


def _forward_kwargs(attention_mask: Tensor | None, extra: dict[str, Any] | None) -> dict[str, Any]:
    kw = dict(extra or {})
    if attention_mask is not None:
        kw["attention_mask"] = attention_mask
    return kw


@torch.no_grad()
def cache_z(
    model: Model, tokens: IdsLike, layers: Iterable[int], attention_mask: IdsLike | None = None, **forward_kwargs: Any
) -> tuple[Any, dict[int, Tensor]]:
    """One clean forward pass; returns (output, {layer: hook_z [batch, pos, head, d_head]}), the
    output being whatever the model returns."""
    tokens = torch.as_tensor(tokens)
    names = [z_name(layer) for layer in sorted(set(int(x) for x in layers))]
    out, cache = model.run_with_cache(
        tokens, names_filter=names, **_forward_kwargs(_mask_or_none(tokens, attention_mask), forward_kwargs)
    )
    return out, {layer_of(name): cache[name] for name in names}


def _resample_index(groups: Sequence, lengths: Sequence[int], seed: int) -> np.ndarray:
    """For every row, another row of the same group (same length where one exists). Seeded."""
    rng = np.random.default_rng(seed)
    n = len(groups)
    src = np.arange(n)
    keys = {}
    for i, g in enumerate(groups):
        keys.setdefault(g, []).append(i)
    for rows in keys.values():
        if len(rows) < 2:
            raise ValueError(
                "resample ablation needs at least two prompts in every group (a prompt cannot be its "
                f"own source); group of row {rows[0]} has one"
            )
        for i in rows:
            same_len = [j for j in rows if j != i and lengths[j] == lengths[i]]
            pool = same_len or [j for j in rows if j != i]
            src[i] = pool[rng.integers(len(pool))]
    return src


@torch.no_grad()
def ablation_source(
    z: Mapping[int, Tensor],
    kind: str = "mean",
    attention_mask: IdsLike | None = None,
    groups: Sequence | None = None,
    seed: int = 0,
) -> dict[int, Tensor]:
    """Replacement values of ``hook_z`` per layer, shaped like the clean ``z`` [batch, pos, head, d_head].

    z: the clean run's ``hook_z`` per layer (``cache_z``). kind: "zero", "mean", "resample".
    attention_mask: which tokens are real (means are taken over real tokens only).
    groups: a label per prompt; resampling draws the source prompt from the same group (default:
    all prompts form one group).
    """
    if kind not in ABLATIONS:
        raise ValueError(f"ablation kind {kind!r} is unknown; use one of {ABLATIONS}")
    out = {}
    idx = None
    for layer, value in z.items():
        batch, pos = value.shape[:2]
        mask = (
            torch.ones(batch, pos, dtype=torch.bool)
            if attention_mask is None
            else torch.as_tensor(attention_mask).bool()
        )
        if kind == "zero":
            out[layer] = torch.zeros_like(value)
        elif kind == "mean":  # accumulated in fp32 at least (a bf16/fp16 model's z is upcast), then cast back
            acc = torch.promote_types(value.dtype, torch.float32)
            w = mask.to(acc)[:, :, None, None]
            mean = (value.to(acc) * w).sum((0, 1)) / w.sum()  # [head, d_head]
            out[layer] = mean.to(value.dtype)[None, None].expand_as(value)
        else:
            if idx is None:
                g = [0] * batch if groups is None else list(groups)
                if len(g) != batch:
                    raise ValueError(f"groups has {len(g)} labels for a batch of {batch} prompts")
                idx = torch.as_tensor(_resample_index(g, mask.sum(1).tolist(), seed))
            out[layer] = value[idx]
    return out


def ablation_hooks(heads: Sequence[Head], source: Mapping[int, Tensor]) -> list[tuple[str, Callable]]:
    """(hook name, function) pairs that replace each listed head's ``z`` by ``source[layer]``'s.
    One hook per layer, so a set of heads costs no more hooks than layers."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)
    hooks = []
    for layer, hs in sorted(by_layer.items()):
        if layer not in source:
            raise KeyError(f"no replacement values for layer {layer}; the source has layers {sorted(source)}")
        idx = torch.tensor(sorted(set(hs)))

        def fn(z: Tensor, hook: HookPoint, idx: Tensor = idx, src: Tensor = source[layer]) -> Tensor:
            if src.shape[:2] != z.shape[:2]:
                raise ValueError(
                    f"{hook.name}: replacement values are [batch={src.shape[0]}, pos={src.shape[1]}] but the run "
                    f"has [batch={z.shape[0]}, pos={z.shape[1]}]; build the source from the same prompts"
                )
            z = z.clone()
            z[:, :, idx] = src[:, :, idx].to(z.dtype)
            return z

        hooks.append((z_name(layer), fn))
    return hooks


def replace_all(x: Tensor, hook: HookPoint, src: Tensor) -> Tensor:
    """A hook function (bind ``src`` with ``functools.partial``): the activation replaced whole by
    ``src`` (the same shape; cast to the activation's dtype)."""
    return src.to(x.dtype)


def replace_stacked(x: Tensor, hook: HookPoint, src: Tensor, where: Tensor) -> Tensor:
    """A hook function for a batch stacked ``g = where.shape[0]`` times (copy i: rows i*b .. (i+1)*b
    - 1): the activation replaced by ``src`` (one copy's shape) where ``where`` is True. ``where``
    [g, 1, 1, ...] broadcasts against one copy: [g, 1, 1, head, 1] replaces heads of ``hook_z``
    copy by copy, [g, 1, 1, 1] whole activations. Bind ``src`` and ``where`` with ``partial``."""
    copies = x.view(where.shape[0], -1, *x.shape[1:])
    return torch.where(where.to(x.device), src.to(x.dtype)[None], copies).view_as(x)


@contextmanager
def ablated(model: Model, heads: HeadsLike, source: Mapping[int, Tensor]) -> Iterator[Model]:
    """``with ablated(model, heads, source): model(...)``: the heads are ablated inside the block and
    the hooks are gone afterwards, also when the block raises."""
    heads = normalize_heads(model, heads)
    with model.hooks(fwd_hooks=ablation_hooks(heads, source)):
        yield model


@torch.no_grad()
def run_ablated(
    model: Model,
    tokens: IdsLike,
    heads: HeadsLike,
    kind: str = "mean",
    attention_mask: IdsLike | None = None,
    source: Mapping[int, Tensor] | None = None,
    groups: Sequence | None = None,
    seed: int = 0,
    **forward_kwargs: Any,
) -> Any:
    """Forward pass with a head or a set of heads ablated. Without ``source`` the replacement values
    come from a clean run on the same tokens (mean over its real tokens, or resampled prompts).
    Returns what the model returns."""
    tokens = torch.as_tensor(tokens)
    heads = normalize_heads(model, heads)
    mask = _mask_or_none(tokens, attention_mask)
    if source is None:
        if kind == "zero":  # shapes only: no clean run needed, but z's shape needs d_head
            b, p = tokens.shape[-2:] if tokens.ndim == 2 else (1, tokens.shape[-1])
            v = model_view(model)
            d_head, n_heads = v.d_head, v.n_heads
            source = {layer: torch.zeros(b, p, n_heads, d_head) for layer, _ in heads}
        else:
            _, z = cache_z(model, tokens, {layer for layer, _ in heads}, attention_mask=mask, **forward_kwargs)
            source = ablation_source(z, kind, attention_mask=mask, groups=groups, seed=seed)
    return model.run_with_hooks(
        tokens, fwd_hooks=ablation_hooks(heads, source), **_forward_kwargs(mask, forward_kwargs)
    )


class _Bound:
    """For models without ``inputs_bound`` (a TransformerLens bridge): what
    ``transformer_lens.patching`` reads (``cfg``, the eval mode, ``run_with_hooks``), passing the
    bound forward arguments on with every call."""

    def __init__(self, model: Model, forward_kwargs: dict[str, Any]) -> None:
        self.model, self.cfg, self.forward_kwargs = model, model.cfg, forward_kwargs

    def named_modules(self, *args: Any, **kwargs: Any) -> Any:  # patching checks every module's eval mode
        return self.model.named_modules(*args, **kwargs)

    @property
    def training(self) -> bool:
        return self.model.training

    def run_with_hooks(self, tokens: Tensor, fwd_hooks: Sequence = (), **kwargs: Any) -> Any:
        return self.model.run_with_hooks(tokens, fwd_hooks=list(fwd_hooks), **{**self.forward_kwargs, **kwargs})


@contextmanager
def _with_inputs(model: Model, tokens: Tensor, forward_kwargs: dict[str, Any]) -> Iterator[Model]:
    """``model`` ready for ``transformer_lens.patching`` on ``tokens``, with ``forward_kwargs``
    (the attention mask of a padded batch, token types) applied to every call on them."""
    if not forward_kwargs:
        yield model
    elif hasattr(model, "inputs_bound"):
        with model.inputs_bound(tokens, **forward_kwargs):
            yield model
    else:
        yield _Bound(model, forward_kwargs)


def _sweep_from_layer(
    model: Model,
    tokens: Tensor,
    source: Mapping[int, Tensor],
    metrics: Mapping[str, Callable[[Tensor], Tensor]],
    heads: Sequence[Head],
    mask: Tensor | None,
    forward_kwargs: dict[str, Any],
) -> dict[str, np.ndarray]:
    layers = sorted({layer for layer, _ in heads})
    names = [act_name(layer, "hook_resid_pre") for layer in layers]
    _, cache = model.run_with_cache(
        tokens, attention_mask=mask, names_filter=names, return_type=None, return_cache_object=False, **forward_kwargs
    )
    out: dict[str, list] = {name: [] for name in metrics}
    for layer, head in heads:
        ((name, fn),) = ablation_hooks([(layer, head)], source)
        with model.hooks(fwd_hooks=[(name, fn)]):
            result = model.run_from_layer(layer, cache[act_name(layer, "hook_resid_pre")], attention_mask=mask)
        for metric, f in metrics.items():
            out[metric].append(torch.as_tensor(f(result)).detach().cpu().numpy())
    return {metric: np.stack(values) for metric, values in out.items()}


@torch.no_grad()
def head_sweep(
    model: Model,
    tokens: IdsLike,
    source: Mapping[int, Tensor],
    metrics: Mapping[str, Callable[[Tensor], Tensor]],
    heads: HeadsLike | None = None,
    attention_mask: IdsLike | None = None,
    from_layer: bool = True,
    **forward_kwargs: Any,
) -> dict[str, np.ndarray]:
    """Replace one head at a time by ``source`` (one forward pass over the whole batch per head) and
    evaluate every metric on the output. Returns ``{metric: array [n_heads_listed, batch]}`` in the
    order of ``heads`` (default: every head).

    Runs ``transformer_lens.patching.generic_activation_patch`` with ``layer_head_vector_patch_setter``
    on ``hook_z``: with an ablation source this is ablation, with a clean run's ``z`` it is activation
    patching (see ``patch_heads``). Metrics map the model's output to a ``[batch]`` tensor (NaN where
    a prompt does not count).

    ``from_layer`` (models with ``run_from_layer``, i.e. the toolkit's): nothing below the edited
    layer changes, so each edited run starts from that layer's input cached from one clean run
    (``blocks.{layer}.hook_resid_pre``) instead of from the tokens: the same operations on the same
    values from there on, so the same numbers bitwise (tested), at about half the cost on average."""
    from transformer_lens.patching import generic_activation_patch, layer_head_vector_patch_setter

    tokens = torch.as_tensor(tokens)
    heads = all_heads(model) if heads is None else normalize_heads(model, heads)
    if not heads:
        return {name: np.zeros((0, tokens.shape[0])) for name in metrics}
    missing = sorted({layer for layer, _ in heads} - set(source))
    if missing:
        raise KeyError(f"the source has no hook_z values for layers {missing}")
    if from_layer and hasattr(model, "run_from_layer") and set(forward_kwargs) <= {"token_type_ids"}:
        return _sweep_from_layer(
            model, tokens, source, metrics, heads, _mask_or_none(tokens, attention_mask), forward_kwargs
        )
    index_df = pd.DataFrame(heads, columns=["layer", "head"])
    cache = {z_name(layer): value for layer, value in source.items()}
    with _with_inputs(model, tokens, _forward_kwargs(_mask_or_none(tokens, attention_mask), forward_kwargs)) as m:
        result = generic_activation_patch(
            m,
            tokens,
            cache,
            dict(metrics),
            patch_setter=layer_head_vector_patch_setter,
            activation_name="z",
            index_df=index_df,
            reduce="none",
        )
    values = result.values  # [metric, n_heads, batch]
    return {name: values[i].cpu().numpy() for i, name in enumerate(result.metric_names)}


def _token_batch(name: str, value: IdsLike) -> Tensor:
    """``value`` as one tensor of token ids; a batch whose rows have different lengths (a ragged
    list, a list of 1-d tensors) is refused in one line naming ``name`` and the lengths."""
    if isinstance(value, (list, tuple)) and value and all(hasattr(r, "__len__") for r in value):
        lengths = [len(r) for r in value]
        if len(set(lengths)) > 1:
            raise ValueError(
                f"{name}: rows of different lengths {lengths}; pad them to one length and pass attention_mask "
                "(0 on padding): patching copies activations position by position"
            )
        if all(isinstance(r, Tensor) for r in value):
            return torch.stack(list(value))
    return torch.as_tensor(value)


def _same_padding(tokens: Tensor, clean_mask: IdsLike | None, corrupted_mask: IdsLike | None) -> None:
    """Refuse a pair of batches whose rows are of different real lengths (their masks differ): position
    i of a clean row would be copied into position i of a corrupted row that holds another token or
    padding."""
    if corrupted_mask is None:
        return
    clean = _mask_or_none(tokens, clean_mask)
    corrupted = _mask_or_none(tokens, corrupted_mask).bool()
    clean = torch.ones_like(corrupted) if clean is None else clean.bool()
    differ = (clean != corrupted).any(-1)
    if differ.any():
        row = int(differ.nonzero()[0, 0])
        raise ValueError(
            f"row {row}: the clean prompt has {int(clean[row].sum())} real tokens and the corrupted one "
            f"{int(corrupted[row].sum())} (or the padding sits elsewhere); patching copies activations position by "
            "position, so each pair needs the same length and padding"
        )


@torch.no_grad()
def patch_heads(
    model: Model,
    clean_tokens: IdsLike,
    corrupted_tokens: IdsLike,
    metrics: Mapping[str, Callable[[Tensor], Tensor]],
    heads: HeadsLike | None = None,
    attention_mask: IdsLike | None = None,
    corrupted_attention_mask: IdsLike | None = None,
) -> dict[str, np.ndarray]:
    """Activation patching: run the corrupted input with one head's ``z`` taken from the clean run.
    Clean and corrupted prompts must have the same shape (token-aligned). Returns
    ``{metric: [n_heads_listed, batch]}``."""
    clean_tokens = _token_batch("clean_tokens", clean_tokens)
    corrupted_tokens = _token_batch("corrupted_tokens", corrupted_tokens)
    if clean_tokens.shape != corrupted_tokens.shape:
        raise ValueError(
            f"clean tokens {tuple(clean_tokens.shape)} and corrupted tokens {tuple(corrupted_tokens.shape)} must have "
            "the same shape: patching copies activations position by position"
        )
    _same_padding(clean_tokens, attention_mask, corrupted_attention_mask)
    heads = all_heads(model) if heads is None else normalize_heads(model, heads)
    _, z = cache_z(model, clean_tokens, {layer for layer, _ in heads}, attention_mask=attention_mask)
    mask = corrupted_attention_mask if corrupted_attention_mask is not None else attention_mask
    return head_sweep(model, corrupted_tokens, z, metrics, heads=heads, attention_mask=mask)


def head_table(model: Model, values: np.ndarray, heads: HeadsLike | None = None) -> pd.DataFrame:
    """A ``[n_heads_listed, batch]`` array from ``head_sweep`` / ``patch_heads`` (listed in the order of
    ``heads``, default every head) as a ``[layer, head]`` table of its mean over the batch (NaN
    prompts left out): a DataFrame with index ``layer`` and columns ``head`` (TransformerLens's
    axes), NaN for heads not listed."""
    n_layers, n_heads = _n_layers_heads(model)
    heads = all_heads(model) if heads is None else normalize_heads(model, heads)
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] != len(heads):
        raise ValueError(
            f"values must be [n_heads_listed={len(heads)}, batch] as head_sweep returns it, got shape {values.shape}"
        )
    table = np.full((n_layers, n_heads), np.nan)
    with np.errstate(invalid="ignore"):
        mean = np.nanmean(values, axis=1) if values.shape[1] else np.full(len(heads), np.nan)
    for (layer, head), v in zip(heads, mean):
        table[layer, head] = v
    return pd.DataFrame(table, index=pd.RangeIndex(n_layers, name="layer"), columns=pd.RangeIndex(n_heads, name="head"))


# below this clean - corrupted gap (in the metric's units) a normalised score divides by noise: a
# SmolLM2 prompt pair with a logit-difference gap of 0.065 gave scores from -2.75 to +4.11
MIN_GAP = 0.1


@torch.no_grad()
def patching_table(
    model: Model,
    clean_tokens: IdsLike,
    corrupted_tokens: IdsLike,
    metric: Callable[[Tensor], Tensor],
    heads: HeadsLike | None = None,
    attention_mask: IdsLike | None = None,
    corrupted_attention_mask: IdsLike | None = None,
    normalise: bool = True,
    min_gap: float = MIN_GAP,
) -> pd.DataFrame:
    """Activation patching of every head (or ``heads``) as a ``[layer, head]`` DataFrame (index
    ``layer``, columns ``head``), TransformerLens style: the metric of the corrupted run with the
    head's ``z`` from the clean run, averaged over the batch and, with ``normalise``, scaled as
    ``(patched - corrupted) / (clean - corrupted)`` (1: the head restores the clean behaviour, 0: no
    effect), the clean and corrupted values being the batch means of ``metric`` on unpatched runs.
    ``table.attrs`` holds ``clean``, ``corrupted`` and ``gap``. Warns (``UserWarning``) when
    |gap| < ``min_gap`` or a normalised score leaves [-2, 3]: the scale then divides by noise."""
    if not callable(metric):
        raise TypeError(
            f"metric must be a callable from the model's output to a [batch] tensor or a number, got {metric!r}"
        )
    if not (isinstance(min_gap, (int, float)) and min_gap >= 0):
        raise ValueError(f"min_gap must be a number >= 0, got {min_gap!r}")
    heads = all_heads(model) if heads is None else normalize_heads(model, heads)
    clean_tokens = _token_batch("clean_tokens", clean_tokens)
    corrupted_tokens = _token_batch("corrupted_tokens", corrupted_tokens)
    patched = patch_heads(
        model, clean_tokens, corrupted_tokens, {"m": metric}, heads, attention_mask, corrupted_attention_mask
    )["m"]
    patched = np.asarray(patched, dtype=float)
    if patched.ndim == 1:  # a metric that returns one number (TransformerLens's habit: ``.mean()``)
        patched = patched[:, None]
    table = head_table(model, patched, heads)
    mask = corrupted_attention_mask if corrupted_attention_mask is not None else attention_mask
    clean = _mean_metric(model, clean_tokens, attention_mask, metric)
    corrupted = _mean_metric(model, corrupted_tokens, mask, metric)
    gap = clean - corrupted
    table.attrs.update(clean=clean, corrupted=corrupted, gap=gap, normalised=bool(normalise))
    if not normalise:
        return table
    out = (table - corrupted) / gap if gap != 0 else table * np.nan
    out.attrs.update(table.attrs)
    lo, hi = np.nanmin(out.to_numpy(), initial=np.inf), np.nanmax(out.to_numpy(), initial=-np.inf)
    if abs(gap) < min_gap or lo < -2 or hi > 3:
        import warnings

        warnings.warn(
            f"patching_table: the clean - corrupted metric gap is {gap:.4g} (clean {clean:.4g}, corrupted "
            f"{corrupted:.4g}); normalised scores span {lo:.3g} to {hi:.3g}: too small a gap to normalise by "
            f"(min_gap={min_gap}); use prompts that differ more, or normalise=False",
            UserWarning,
            stacklevel=2,
        )
    return out


def _mean_metric(model: Model, tokens: IdsLike, attention_mask: IdsLike | None, metric: Callable) -> float:
    tokens = torch.as_tensor(tokens)
    out = model(tokens, **_forward_kwargs(_mask_or_none(tokens, attention_mask), None))
    return float(np.nanmean(torch.as_tensor(metric(out)).detach().double().cpu().numpy()))


def plot_head_table(table: pd.DataFrame, ax: Any = None, title: str | None = None, center: float = 0.0) -> Any:
    """A seaborn heatmap of a ``[layer, head]`` table (``head_table``, ``patching_table``): layers
    down, heads across, a diverging palette centred on ``center``. Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if not isinstance(table, pd.DataFrame):
        raise TypeError(
            f"table must be a [layer, head] DataFrame (head_table, patching_table), got {type(table).__name__}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.45 * table.shape[1], 0.8 + 0.4 * table.shape[0]))
    sns.heatmap(table, ax=ax, cmap="RdBu_r", center=center, annot=table.size <= 150, fmt=".2f", cbar=True)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    if title:
        ax.set_title(title)
    return ax
