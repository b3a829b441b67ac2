"""The head probe as an analysis (``analyses.contract``): ``run`` loads the model, keeps the sentences
it can score, probes every head (``analyses.heads.probe.probe_items``) and takes the example
patterns; ``write`` puts the result's files (``OUTPUTS``) into an output folder as one set. This is
``interp probe``'s work, callable from Python.

>>> from analyses import heads
>>> from analyses.data import load_items
>>> res = heads.run("minilm", load_items(n=50, sources="generated,conllu=my.conllu"))
>>> res.heads, res.n_items, res.n_dropped, res.info["params"]
>>> heads.write(res, "runs/minilm")
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses.contract import make_info
from analyses.data.items import Item, keep_tokenizable
from analyses.data.sources import load_items
from analyses.heads.defaults import DEFAULTS, n_repeat_for
from analyses.heads.examples import ExamplePatterns, example_patterns
from analyses.heads.probe import probe_items
from interp.distributed import World, current
from models.tokenizer import LostWordsWarning

__all__ = ["OUTPUTS", "ProbeResult", "run", "write", "ProbeRun", "run_probe"]

# the files of a probe's output folder; pattern_<role>.png is lowercase, so a tour's pattern_L3H0.png
# in the same folder is not the probe's. report.html is rendered from the others by the report layer
# (``analyses.report.page``: ``interp probe`` renders it in the same set, ``interp summary`` again once
# invariance/ and validation/ exist); ``write`` writes every other file.
OUTPUTS = (
    "heads.csv",
    "report.md",
    "report.html",
    "examples.json",
    "role_map.png",
    "heatmaps.png",
    "lens.png",
    "pattern_[a-z]*.png",
)


@dataclass
class ProbeResult:
    """What one probe run gives: ``heads`` (heads.csv's table, one row per head, role, direction,
    source, subset, specials convention and weighting; its first columns model, layer, head; None on
    a worker other than rank 0), ``info`` (the analysis, the model's identity, the seed and the
    parameters: ``analyses.contract.make_info``), how many sentences were probed and how many were
    dropped because a word got no token, the tokenizer's word losses, and the example patterns
    (``examples``: the figures' examples; ``page_examples``: examples.json). ``model`` is the model
    probed, in this process only (not pickled: a worker's result crosses to the writer without it)."""

    heads: pd.DataFrame | None
    info: dict
    n_items: int
    n_dropped: int
    words: dict = field(default_factory=dict)  # words, lost (to [UNK]), changed (by normalisation)
    examples: ExamplePatterns | None = None
    page_examples: dict | None = None
    model: object = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The model's name, as heads.csv's ``model`` column has it."""
        return self.info["model"]

    @property
    def df(self) -> pd.DataFrame | None:
        warnings.warn("ProbeResult.df is now ProbeResult.heads", DeprecationWarning, stacklevel=2)
        return self.heads

    def __getstate__(self) -> dict:
        return {**self.__dict__, "model": None}


@dataclass
class ProbeRun(ProbeResult):
    """Deprecated: ``ProbeResult``."""

    def __post_init__(self) -> None:
        warnings.warn("ProbeRun is now ProbeResult", DeprecationWarning, stacklevel=3)


def run(
    model,
    items: Sequence[Item] | None = None,
    *,
    n: int = DEFAULTS.n,
    seed: int = DEFAULTS.seed,
    sources: Sequence[str] = ("generated",),
    null_model: bool = True,
    n_boot: int = DEFAULTS.n_boot,
    alpha: float = DEFAULTS.alpha,
    batch_size: int = DEFAULTS.batch_size,
    weighting: Sequence[str] = DEFAULTS.weighting,
    device: str = "cpu",
    dtype: str = "float32",
    world: World | None = None,
    progress: bool = True,
    examples: bool = True,
    example_sentences: Sequence[str] | None = None,
    query_block: int | None = None,
) -> ProbeResult:
    """The probe as ``interp probe`` runs it. ``model`` is a name or folder for ``models.load`` (on
    ``device``, in ``dtype``; with several CUDA workers each takes ``cuda:<local rank>``) or a loaded
    model; ``items`` the sentences (default: ``n`` items per relation from ``sources``, drawn with
    ``seed``). Sentences in which a word gets no token of its own under the model's tokenizer (a
    byte-level BPE can merge two punctuation words of real text) are dropped and counted: word-level
    scores cannot be defined there. ``n`` also sets the random repeated-token sequences
    (``n_repeat_for``). ``examples``: take every head's patterns on the example sentences for the
    figures and the page (``example_sentences``, one string each, replace the built-in ones on the
    page). ``query_block``: each layer's pattern reduced that many query rows at a time
    (``models.blockwise``; the toolkit's own models), so a long sentence costs block x n per layer, not
    n x n. The other arguments go to ``probe_items``; defaults are ``DEFAULTS``."""
    import torch

    import models

    w = world if world is not None else current()  # probe_items takes the same default
    items = list(items) if items is not None else load_items(n=n, seed=seed, sources=sources)
    with torch.no_grad():  # scoped: also called in-process (tests, notebooks)
        if isinstance(model, str):
            if w.size > 1 and torch.device(device).type == "cuda":
                device = f"cuda:{w.local_rank}"  # one GPU per worker
            model = models.load(model, device=device, dtype=dtype)
        words: dict = {}
        with warnings.catch_warnings():  # lost and changed words are counted once for the run (``words``)
            warnings.simplefilter("ignore", LostWordsWarning)
            kept = items if model.tokenizer is None else keep_tokenizable(items, model.tokenizer, counts=words)
            df = probe_items(
                model,
                kept,
                n_repeat=n_repeat_for(n),
                seed=seed,
                null_model=null_model,
                n_boot=n_boot,
                alpha=alpha,
                batch_size=batch_size,
                progress=progress and w.is_main,
                weighting=tuple(weighting),
                world=world,
                query_block=query_block,
            )
        figures, page = _examples(model, df, example_sentences) if examples and w.is_main else (None, None)
    if w.is_main:
        df.attrs["word_losses"] = words
        if examples and example_sentences is not None:  # report.md says where they are shown
            df.attrs["example_sentences"] = len(page["sentences"]) if page else len(list(example_sentences))
    params = dict(n=n, n_repeat=n_repeat_for(n), null_model=null_model, n_boot=n_boot, alpha=alpha)
    params.update(batch_size=batch_size, weighting=list(weighting), device=device, dtype=dtype, workers=w.size)
    if query_block is not None:
        params.update(query_block=query_block)
    return ProbeResult(
        heads=df if w.is_main else None,
        info=make_info("heads", model, seed, **params),
        n_items=len(kept),
        n_dropped=len(items) - len(kept),
        words=words,
        examples=figures,
        page_examples=page,
        model=model,
    )


def _examples(model, df: pd.DataFrame, sentences: Sequence[str] | None) -> tuple[ExamplePatterns, dict]:
    """(the figures' examples on the built-in sentences, the page's patterns: on ``sentences`` where
    given, else on the built-in ones): one pass over every head."""
    figures = example_patterns(model, df)
    return figures, (figures if sentences is None else example_patterns(model, sentences=sentences)).page()


def write(result: ProbeResult, folder: str | Path, force: bool = False, *, command: str | None = None) -> Path:
    """Write ``result`` into ``folder`` as one output set (``interp.io.write_set``): heads.csv,
    report.md and the figures (``analyses.heads.report.write_report``), examples.json (where the run
    took examples). ``command``: the command line report.md cites. ``force``: replace files of these
    names that no toolkit run wrote. Inside a command's open set (its staging folder), writes there.
    report.html is the report layer's (``analyses.report.page.write_page``)."""
    from analyses.heads.report import write_report
    from interp.io import atomic_write, write_set

    if result.heads is None:
        raise ValueError("this result has no heads table (a worker's other than rank 0): nothing to write")

    def files(tmp: Path) -> None:
        write_report(result.heads, tmp, examples=result.examples or (), command=command)
        if result.page_examples is not None:
            atomic_write(tmp / "examples.json", json.dumps(result.page_examples, separators=(",", ":")))

    return write_set(folder, OUTPUTS, files, command="interp probe", force=force)


def run_probe(model, items: Sequence[Item], **kwargs) -> ProbeResult:
    """Deprecated: ``run`` (``examples=False``, as ``run_probe`` took none)."""
    warnings.warn("run_probe is now analyses.heads.run", DeprecationWarning, stacklevel=2)
    kwargs.setdefault("examples", False)
    return run(model, items, **kwargs)
