"""Every family joins every analysis or is refused by it up front, in one line that says why.

Each architecture of ``models.tiny.ARCHITECTURES`` (today's and any added later: the test reads the
registry) is saved as a tiny Hugging Face folder, read back by ``models.load`` and walked through
the probe, invariance, the circuits at node and at edge level, the catalogue and QK attribution,
at the smallest settings each allows. The rule of each walk is the analysis's own refusal function
applied to the model (``analyses.architecture`` holds the features they name):

* it refuses: the analysis raises a ValueError whose one-line message is the refusal's, before any
  module of the model has run (a forward pre-hook on every module counts the calls);
* it does not: the analysis runs to the end and its outputs cover every head with finite numbers
  (and, where it decomposes something exactly, the parts add up).

Anything else (an exception mid-way, a refusal the function did not announce, a refusal after the
model ran) fails the test with the architecture and the analysis named. A family the installed
transformers lacks is skipped with ``available``'s reason.

The tiny configs have a 97-token vocabulary and no tokenizer: each model gets a word-level one of
exactly that size (the planted vocabulary, the invariance checks' default sentence, fillers), attached
after loading, since transformers 5 picks the tokenizer class by ``model_type`` for some families
(Qwen2 rebuilds a byte-level BPE from it and reads every text as nothing). The circuits and the
catalogue read period-2 copy pairs oriented so the model "solves" each one (right and wrong swapped
where it prefers the wrong token): the walk asks whether the analysis runs, not whether a random
model shows the behaviour.
"""

from __future__ import annotations

import contextlib
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import analyses.catalogue as catalogue
import analyses.circuits as circuits
import analyses.heads as heads
import analyses.invariance as invariance
import analyses.qk as qk
import models
from analyses.architecture import present
from analyses.catalogue.planted import ROLE_TASKS, TASK, copy_pairs, heads_table
from analyses.invariance.common import DEFAULT_TEXT
from interp.pairs import Pairs, logit_diff
from models.tiny import ARCHITECTURES, V, available, save_tiny
from tests.factories import VOCAB, planted_items

pytestmark = pytest.mark.usefixtures("one_thread")

KEYS = sorted(ARCHITECTURES)
PAIRS = 12  # copy pairs per family (circuits, catalogue, QK): 9 to find circuits on, 3 held out


# --------------------------------------------------------------------------------------------------
# The families, with a tokenizer and pairs


def walk_tokenizer(encoder: bool) -> models.Tokenizer:
    """A word-level tokenizer of exactly ``V`` tokens: the planted vocabulary (``tests.factories``),
    [MASK], the words of the invariance checks' default sentence, then fillers. An encoder's wraps
    every sentence in [CLS] ... [SEP]."""
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers import models as tm
    from transformers import PreTrainedTokenizerFast

    words = [*VOCAB, "[MASK]"]
    words += [w for w in dict.fromkeys(DEFAULT_TEXT.replace(".", " .").split()) if w not in words]
    words += [f"w{i}" for i in range(len(words), V)]
    assert len(words) == V, f"the walk's vocabulary has {len(words)} words, the tiny models {V}"
    ids = {w: i for i, w in enumerate(words)}
    t = Tokenizer(tm.WordLevel(ids, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    extra: dict = {"bos_token": "[CLS]"}
    if encoder:
        t.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])]
        )
        extra.update(cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    hf = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", pad_token="[PAD]", **extra)
    return models.Tokenizer(hf)


def oriented(model: Any, pairs: Pairs) -> Pairs:
    """``pairs`` with right and wrong swapped where the model prefers the wrong answer: every pair
    solved (clean logit difference > 0; a tie keeps its order and is dropped by the tasks)."""
    from analyses.circuits.tasks import clean_logit_diff

    flip = torch.as_tensor(clean_logit_diff(model, pairs) < 0)
    right = torch.where(flip, pairs.wrong, pairs.right)
    wrong = torch.where(flip, pairs.right, pairs.wrong)
    held = torch.zeros(len(pairs), dtype=torch.bool)
    held[-(len(pairs) // 4) :] = True
    return Pairs(pairs.clean, pairs.corrupted, right, wrong, pairs.position, held_out=held)


class Family:
    """One architecture, loaded: ``model`` and its ``pairs`` (period-2 copy prompts, oriented)."""

    def __init__(self, key: str, folder) -> None:
        tiny = ARCHITECTURES[key]
        save_tiny(key, folder)
        self.key = key
        self.model = models.load(str(folder)).eval()
        self.model.tokenizer = walk_tokenizer(tiny.encoder)
        cfg = self.model.cfg
        # ids from 5 on: not [PAD], [UNK] or the specials the planted vocabulary starts with
        raw = copy_pairs(PAIRS, seed=1, length=8, vocab=V - 5)
        shift = lambda t: t + 5  # noqa: E731
        raw = Pairs(shift(raw.clean), shift(raw.corrupted), shift(raw.right), shift(raw.wrong), raw.position)
        self.pairs = oriented(self.model, raw) if cfg.lm_head else raw


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> Callable[[str], Family]:
    """The families by key, each built once per module (skipped where transformers lacks it)."""
    built: dict[str, Family] = {}

    def get(key: str) -> Family:
        why = available(key)
        if why:
            pytest.skip(f"{key}: {why}")
        if key not in built:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                built[key] = Family(key, tmp_path_factory.mktemp("tiny") / key)
        return built[key]

    return get


# --------------------------------------------------------------------------------------------------
# One walk: refused up front in one line, or run to the end


@contextlib.contextmanager
def counted(model: Any):
    """The names of the modules of ``model`` called while the block runs (any submodule, on any
    path: ``forward``, ``attention_layer``, a deep copy's), in the yielded list."""
    calls: list[str] = []
    handles = [
        m.register_forward_pre_hook(lambda mod, args, _name=name: calls.append(_name))
        for name, m in model.named_modules()
    ]
    try:
        yield calls
    finally:
        for h in handles:
            h.remove()


def walk(fam: Family, analysis: str, why: str | None, run: Callable[[], Any]) -> Any:
    """Run ``run()`` on ``fam``'s model and hold it to ``why`` (the analysis's refusal: None or ''
    where it takes the model): the result where it runs, None where it refused as announced."""
    where = f"{fam.key} x {analysis} (features: {', '.join(present(fam.model.cfg)) or 'none'})"
    with counted(fam.model) as calls, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lost words, empty slices: the walk's numbers are a random model's
        try:
            result = run()
        except ValueError as e:
            message = str(e)
            if not why:
                pytest.fail(f"{where}: refused although its refusal function takes it ({message})\n"
                            f"{traceback.format_exc()}")  # fmt: skip
            assert why in message, f"{where}: refused with {message!r}, not the announced {why!r}"
            assert "\n" not in message, f"{where}: a refusal of more than one line: {message!r}"
            assert not calls, f"{where}: refused after {len(calls)} module calls (first {calls[0]}): not up front"
            return None
        except Exception as e:  # noqa: BLE001 - any crash fails the walk, named
            pytest.fail(f"{where}: crashed mid-way ({type(e).__name__}: {e})\n{traceback.format_exc()}")
    if why:
        pytest.fail(f"{where}: ran to the end although its refusal function says: {why}")
    assert calls, f"{where}: ran without calling the model"
    return result


def _every_head(table, model: Any, where: str) -> None:
    cfg = model.cfg
    got = set(zip(table["layer"].astype(int), table["head"].astype(int)))
    want = {(l, h) for l in range(cfg.n_layers) for h in range(cfg.n_heads)}
    assert got == want, f"{where}: heads {sorted(want - got)} missing, {sorted(got - want)} unknown"


def _finite(values, where: str) -> None:
    values = np.asarray(values, dtype=float)
    assert values.size and np.isfinite(values).all(), f"{where}: {np.size(values) - np.isfinite(values).sum()} of " \
        f"{values.size} values are not finite"  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The walks


@pytest.mark.parametrize("key", KEYS)
def test_probe(family, key):
    """The probe reads attention patterns: every architecture has them."""
    fam = family(key)
    kw = dict(n=12, n_boot=10, null_model=False, seed=4, progress=False, examples=False)
    res = walk(fam, "probe", None, lambda: heads.run(fam.model, planted_items(12, seed=2), **kw))
    _every_head(res.heads, fam.model, f"{key} probe")
    scored = res.heads[res.heads["n"] > 0]  # a relation the planted sentences lack has no score (n = 0)
    _every_head(scored, fam.model, f"{key} probe scores")
    _finite(scored["score"], f"{key} probe scores")


@pytest.mark.parametrize("key", KEYS)
def test_invariance(family, key):
    """Every check, on inputs longer than the sliding windows of the windowed families (4 tokens):
    a sliding layer's unmasked call reads its window's worth (it used to fail in the middle)."""
    fam = family(key)
    res = walk(fam, "invariance", invariance.refusal(fam.model), lambda: invariance.run(fam.model, n_tokens=10, seed=3))
    if res is None:
        return
    _every_head(res.heads, fam.model, f"{key} invariance")
    table = res.table
    failed = table[~table["passed"]]
    assert failed.empty, f"{key}: invariance rows fail:\n{failed[['check', 'quantity', 'value', 'tolerance']]}"


def _circuit(fam: Family, edges: bool):
    kw = dict(n=PAIRS, seed=3, steps=1, n_random=1, batch_size=PAIRS, exact_pairs=3, all_tasks=False, labels="none",
              min_accuracy=0, min_pairs=4, proportions=(0.5, 1.0), edge_curve=False)  # fmt: skip
    generator = lambda task, tokenizer, n, seed: fam.pairs  # noqa: E731
    return circuits.run(fam.model, "induction", edges=edges, generator=generator, **kw)


@pytest.mark.parametrize("key", KEYS)
def test_circuit_nodes(family, key):
    fam = family(key)
    res = walk(fam, "circuit (nodes)", circuits.circuit_refusal(fam.model), lambda: _circuit(fam, edges=False))
    if res is None:
        return
    assert res.task.solved, f"{key}: {res.task.why_not()}"
    _every_head(res.heads, fam.model, f"{key} circuit")
    _finite(res.heads[["eap", "eap-ig", "exact_effect"]], f"{key} circuit node scores")
    _finite(res.curve["faithfulness"], f"{key} circuit faithfulness")


@pytest.mark.parametrize("key", KEYS)
def test_circuit_edges(family, key):
    """Edge attribution itself (``edge_scores``: refused by ``edge_refusal``), then the circuit run
    with edges asked for: where the node level runs, it decides about the edges before the model
    runs and says why it skipped them."""
    fam = family(key)
    model = fam.model
    why = circuits.edge_refusal(model.cfg)
    table = walk(fam, "edge scores", why, lambda: circuits.edge_scores(model, fam.pairs, logit_diff, steps=1))
    if table is not None:
        graph = circuits.edge_graph(model)
        assert len(table) == int(graph.valid.sum()), f"{key}: {len(table)} edges scored of {int(graph.valid.sum())}"
        _finite(table["score"], f"{key} edge scores")
    if circuits.circuit_refusal(model):
        return
    res = walk(fam, "circuit (edges)", None, lambda: _circuit(fam, edges=True))
    skipped = circuits.edge_level_ok(model)
    assert res.info["edges"] == (skipped or "scored"), (key, res.info["edges"])
    assert (res.edges is None) == bool(skipped), key
    if res.edges is not None:
        _finite(res.edges["score"], f"{key} top edges")


@pytest.mark.parametrize("key", KEYS)
def test_catalogue(family, key):
    """Patching and node attribution (a causal LM), or ``interp validate``'s ablations (an encoder):
    the model's own hooks, whatever the architecture."""
    fam = family(key)
    model = fam.model
    labels = heads_table(model, {(0, 0): "previous_token"})
    kw = dict(n=8, eap_pairs=2, ig_steps=1, seed=3, encoder_n=4, all_position_heads=1, batch_size=PAIRS)
    res = walk(fam, "catalogue", None, lambda: catalogue.run(model, labels, pairs={TASK: fam.pairs},
                                                             role_tasks=ROLE_TASKS, **kw))  # fmt: skip
    _every_head(res.heads, model, f"{key} catalogue")
    measured = res.heads[res.heads["effect"].notna()]
    if model.cfg.lm_head:  # the planted task is solved (the pairs are oriented): every head patched
        assert bool(res.tasks["solved"].all()), res.tasks
        _every_head(measured, model, f"{key} catalogue effects")
    _finite(measured["effect"] if len(measured) else [0.0], f"{key} catalogue effects")


@pytest.mark.parametrize("key", KEYS)
def test_qk(family, key):
    """Every head's score on the differing (target) position, split into stream-component terms
    that add up to the model's own score."""
    fam = family(key)
    model = fam.model
    every = [(l, h) for l in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
    res = walk(fam, "qk", qk.refusal(model), lambda: qk.run(model, "subject_verb", every, seed=3, pairs=fam.pairs,
                                                            top=2, batch_size=PAIRS))  # fmt: skip
    if res is None:
        return
    _every_head(res.heads, model, f"{key} qk")
    prompts = res.prompts
    _finite(prompts[["score", "difference"]], f"{key} qk scores")
    scale = float(prompts["score"].abs().max()) + 1.0
    worst = float(prompts[["error", "difference_error"]].abs().max().max())
    assert worst <= 1e-4 * scale, f"{key}: QK terms miss the model's score by {worst:.2e} (scale {scale:.1f})"
