"""Hub names resolved from the local Hugging Face cache, without network (issue 25, section 3).

The test builds a cache folder with the layout ``huggingface_hub`` writes: a tiny randomly
initialised Llama (with a tokenizer) saved by ``save_pretrained``, its files moved into
``models--owner--name/blobs/<sha256>`` and linked from ``snapshots/<commit>/<file>`` by relative
symlinks, ``refs/main`` holding the commit. ``models.load("owner/name")`` must find it (through
``huggingface_hub``'s own offline lookup) and compute what the model saved there computes;
every network connection is refused meanwhile, so a test that passes used none.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket

import pytest
import torch
import transformers

import models
from models import hub
from tests.factories import tiny_hf_llama_config, word_tokenizer

NAME = "tiny-owner/tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _as_hub_cache(folder, cache, name: str, commit: str) -> None:
    """Move the files of ``folder`` into ``cache`` as huggingface_hub lays them out."""
    repo = cache / f"models--{name.replace('/', '--')}"
    blobs, snapshot = repo / "blobs", repo / "snapshots" / commit
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)  # no newline, as huggingface_hub writes it
    for file in sorted(folder.iterdir()):
        blob = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.move(str(file), blobs / blob)
        (snapshot / file.name).symlink_to(os.path.join("..", "..", "blobs", blob))


@pytest.fixture(scope="module")
def fake_cache(tmp_path_factory):
    """(cache folder, the Hugging Face model saved in it)."""
    cfg = tiny_hf_llama_config(97, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in hf.parameters():  # perturbed, so unit norms hide nothing
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    saved = tmp_path_factory.mktemp("saved")
    hf.save_pretrained(str(saved))
    word_tokenizer().hf.save_pretrained(str(saved))
    cache = tmp_path_factory.mktemp("hf") / "hub"
    _as_hub_cache(saved, cache, NAME, COMMIT)
    return cache, hf


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def _cache_env(monkeypatch, **env) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, str(value))


def test_a_hub_name_loads_from_the_local_cache(fake_cache, monkeypatch, no_network):
    cache, hf = fake_cache
    _cache_env(monkeypatch, HF_HUB_CACHE=cache)
    model = models.load(NAME)
    assert model.cfg.name == NAME and model.tokenizer is not None
    snapshot = cache / f"models--{NAME.replace('/', '--')}" / "snapshots" / COMMIT
    assert hub.resolve(NAME) == snapshot and (snapshot / "model.safetensors").is_symlink()
    tokens = torch.randint(1, 97, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ours = model(tokens, exact=True)
        theirs = hf(tokens).logits
    assert torch.equal(ours, theirs)  # eager against eager: bitwise, as every Llama folder loads
    # the tokenizer came from the snapshot too
    assert model.to_tokens("the cat").tolist() == [word_tokenizer().hf("the cat")["input_ids"]]


def test_the_cache_folder_follows_huggingface_hub_precedence(fake_cache, monkeypatch, tmp_path):
    cache, _ = fake_cache
    home = cache.parent  # .../hf, holding hub/
    _cache_env(monkeypatch, HF_HOME=home)
    assert hub.hub_cache() == cache and hub.resolve(NAME).name == COMMIT
    _cache_env(monkeypatch, XDG_CACHE_HOME=tmp_path)
    assert hub.hub_cache() == tmp_path / "huggingface" / "hub"
    _cache_env(monkeypatch, HF_HOME=home, HF_HUB_CACHE=tmp_path / "elsewhere")  # HF_HUB_CACHE first
    assert hub.hub_cache() == tmp_path / "elsewhere"
    with pytest.raises(hub.HubModelNotFoundError):
        hub.resolve(NAME)
    # a revision the cache holds, by its commit; one it does not hold is not found
    assert hub.resolve(NAME, revision=COMMIT, cache_dir=cache).name == COMMIT
    with pytest.raises(hub.HubModelNotFoundError, match="revision 'v2'"):
        hub.resolve(NAME, revision="v2", cache_dir=cache)


def test_a_model_not_in_the_cache_says_how_to_get_it_in_one_line(fake_cache, monkeypatch, no_network):
    cache, _ = fake_cache
    _cache_env(monkeypatch, HF_HUB_CACHE=cache)
    with pytest.raises(hub.HubModelNotFoundError) as err:
        models.load("HuggingFaceTB/SmolLM2-360M")
    msg = str(err.value)
    assert "\n" not in msg and isinstance(err.value, FileNotFoundError)
    assert "'HuggingFaceTB/SmolLM2-360M'" in msg and str(cache) in msg
    assert "hf download HuggingFaceTB/SmolLM2-360M" in msg and "models--HuggingFaceTB--SmolLM2-360M" in msg
    assert "local folder" in msg


def test_an_incomplete_download_is_named(fake_cache, monkeypatch, tmp_path):
    cache, _ = fake_cache
    partial = tmp_path / "hub"
    shutil.copytree(cache, partial, symlinks=True)
    snapshot = partial / f"models--{NAME.replace('/', '--')}" / "snapshots" / COMMIT
    (snapshot / "config.json").unlink()
    _cache_env(monkeypatch, HF_HUB_CACHE=partial)
    with pytest.raises(hub.HubModelNotFoundError, match="without its config.json.*hf download"):
        models.load(NAME)


def test_names_that_are_neither_list_the_short_names(tmp_path, monkeypatch):
    _cache_env(monkeypatch, HF_HUB_CACHE=tmp_path)
    for name in ("gpt-9000", "a/b/c", "owner/bad name", "/no/such/folder"):
        with pytest.raises(ValueError, match=r"unknown model.*'minilm', 'smollm2'"):
            models.load(name)
    assert hub.is_hub_name(NAME) and hub.is_hub_name("HuggingFaceTB/SmolLM2-360M")
    assert not hub.is_hub_name("smollm2") and not hub.is_hub_name("./owner/name")
