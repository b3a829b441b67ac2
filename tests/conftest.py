"""Shared fixtures. Real models load once per session; tiny configs are seeded and fast."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# before torch loads OpenMP: idle threads sleep instead of spinning. With two test processes on two
# cores a spinning thread steals its neighbour's core (forwards measured up to 20x slower).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import models  # noqa: E402
from models.loading import _hf_load, from_hf, minilm_dir, smollm2_hf_dir  # noqa: E402
from tests.factories import tiny_config  # noqa: E402


def _share_the_cores() -> None:
    """Under pytest-xdist (scripts/test.sh runs ``-n 2``) each worker takes its share of the cores
    for torch's intra-op threads, so the workers do not oversubscribe the machine. A float32 matmul's
    last bits may depend on the thread count; every comparison in the suite is made inside one process
    (ours against Hugging Face's, one path against another), so both sides see the same count."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


_share_the_cores()


@pytest.fixture(scope="session")
def hf_minilm():
    """(Hugging Face BertModel, tokenizer) for sentence-transformers/all-MiniLM-L6-v2, eager attention."""
    return _hf_load(str(minilm_dir()))


@pytest.fixture(scope="session")
def hf_smollm2():
    """(Hugging Face LlamaForCausalLM, tokenizer) for SmolLM2-135M-Instruct: the GGUF dequantised to
    fp32 by transformers once per machine and cached as a plain Hugging Face folder."""
    return _hf_load(str(smollm2_hf_dir()))


@pytest.fixture(scope="session")
def minilm(hf_minilm):
    """The toolkit's MiniLM, converted from the same HF model object (no second read)."""
    hf_model, tok = hf_minilm
    return from_hf(hf_model, tok, name="minilm")


@pytest.fixture(scope="session")
def smollm2(hf_smollm2):
    hf_model, tok = hf_smollm2
    return from_hf(hf_model, tok, name="smollm2")


@pytest.fixture(scope="session")
def minilm_bridge():
    """TransformerLens's TransformerBridge booted offline from MiniLM's folder (eager attention)."""
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(str(minilm_dir()), device="cpu", dtype=torch.float32)
    attn_impl = bridge.original_model.config._attn_implementation
    assert attn_impl == "eager", f"the bridge must run eager attention to expose patterns, got {attn_impl!r}"
    return bridge.eval()


@pytest.fixture(scope="session")
def smollm2_bridge():
    """TransformerLens's TransformerBridge booted offline from the cached SmolLM2 Hugging Face folder
    (eager attention, fp32): a second implementation of the same weights."""
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(str(smollm2_hf_dir()), device="cpu", dtype=torch.float32)
    attn_impl = bridge.original_model.config._attn_implementation
    assert attn_impl == "eager", f"the bridge must run eager attention to expose patterns, got {attn_impl!r}"
    return bridge.eval()


@pytest.fixture
def tiny():
    """A seeded tiny causal model (learned positions, pre-LN, GELU)."""
    torch.manual_seed(0)
    return models.Transformer(tiny_config(), seed=0).eval()


@pytest.fixture(autouse=True)
def _no_leaked_global_state():
    """Every test must leave autograd as it found it: a CLI or analysis that switches it off
    globally (instead of a scoped ``torch.no_grad()``) would silently break later training code."""
    before = torch.is_grad_enabled()
    yield
    assert torch.is_grad_enabled() == before, "this test left torch's grad mode changed"


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on a shared 2-core machine: one torch thread avoids oversubscription (several
    times faster there); modules opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cheap_figures(monkeypatch):
    """The probe report's figures as a few fixed bytes: what these tests check is which files a
    command writes, keeps, flags or merges, not the pictures (tests/analyses/heads/test_report.py draws
    them); drawing them was most of these tests' time."""
    import analyses.heads.report as report

    for name in ("heatmap_figure", "role_map_figure", "lens_figure", "pattern_figure"):
        monkeypatch.setattr(report, name, lambda *a, _name=name, **k: f"png of {_name}".encode())


CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")


def _chromium_or_skip() -> str:
    """The system Chromium's path and a working Playwright, or skip (fail under CI=true). Never a
    downloaded browser: Playwright drives Debian's Chromium through ``executable_path``."""
    exe = os.environ.get("INTERP_CHROMIUM") or next((p for p in CHROMIUM_CANDIDATES if Path(p).exists()), None)
    exe = exe or shutil.which("chromium")
    why = None if exe else "no system Chromium (apt-get install -y chromium; scripts/test.sh does it)"
    if exe:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "playwright is not installed (pip install -e '.[test]')"
    if why:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the browser test cannot run: {why}")
        pytest.skip(why)
    return exe


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module (each test opens its own context); module-scoped so that
    Playwright's event loop never outlives the module that asked for it."""
    exe = _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def pytest_runtest_setup(item):
    """A test that needs a data package setup installs (``tests.packages.needs_package``): skipped
    where it is missing, failed under CI=true."""
    from tests.packages import check

    check(item)


def pytest_collection_modifyitems(config, items):
    """The slow tests first: under pytest-xdist (``-n 2 --dist loadfile``, scripts/test.sh) files are
    handed to the workers in collection order, so the longest files start early instead of running
    alone at the end. (``--dist loadfile`` rather than ``loadgroup``: pytest-xdist 3.8 marks a group
    by editing ``item._nodeid``, which pytest 9 no longer reads, so groups were silently ignored and
    a module's fixtures built in both workers.)"""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
