"""Hugging Face hub names (``"HuggingFaceTB/SmolLM2-360M"``) resolved to a folder of the local
Hugging Face cache, never over the network.

The cache is the one ``huggingface_hub`` writes (``hf download NAME``, or any ``from_pretrained``
on a machine with network): ``models--owner--name/refs/main`` names a commit, whose files sit
under ``snapshots/<commit>/`` as links into ``blobs/``. ``huggingface_hub`` itself finds the
snapshot (``snapshot_download(..., local_files_only=True)``), so the layout is read by its owner's
code; this module only chooses the cache folder at call time (``huggingface_hub`` fixes it when
first imported) and turns "not there" into one line saying how to get the model.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HubModelNotFoundError", "hub_cache", "is_hub_name", "resolve"]


class HubModelNotFoundError(FileNotFoundError):
    """A hub name that is not in the local Hugging Face cache: one line saying how to get it."""


def hub_cache() -> Path:
    """The folder ``huggingface_hub`` caches models in, read from the environment now, with its
    precedence: ``$HF_HUB_CACHE``, ``$HUGGINGFACE_HUB_CACHE`` (its older name), ``$HF_HOME/hub``,
    ``$XDG_CACHE_HOME/huggingface/hub``, ``~/.cache/huggingface/hub``."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def is_hub_name(name: str) -> bool:
    """Whether ``name`` is spelt like a hub model id, ``owner/name`` (letters, digits, ``-_.``)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if name.count("/") != 1 or name.startswith((".", "/", "~")):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def resolve(name: str, revision: str = "main", cache_dir: str | Path | None = None) -> Path:
    """The local folder of hub model ``name`` at ``revision`` (a branch, tag or commit the cache
    holds): the snapshot ``huggingface_hub`` wrote, with ``config.json`` and the weights. Reads the
    cache only (``cache_dir``, default ``hub_cache()``); raises ``HubModelNotFoundError`` when
    the model, or its ``config.json``, is not there."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = Path(cache_dir) if cache_dir is not None else hub_cache()
    get = (
        f"on a machine with network run `hf download {name}` and copy its {cache.name}/models--"
        f"{name.replace('/', '--')} folder into {cache} (or set HF_HUB_CACHE to a cache that holds it), "
        "or pass a local folder of the model"
    )
    try:
        folder = Path(snapshot_download(name, revision=revision, cache_dir=str(cache), local_files_only=True))
    except LocalEntryNotFoundError:
        raise HubModelNotFoundError(
            f"model {name!r} (revision {revision!r}) is not in the local Hugging Face cache {cache}, and the "
            f"toolkit downloads nothing: {get}"
        ) from None
    if not (folder / "config.json").exists():
        raise HubModelNotFoundError(
            f"model {name!r} is in the Hugging Face cache {cache} without its config.json (an incomplete download, "
            f"{folder}): {get}"
        )
    return folder
