"""The worker launcher of the commands that shard their work (``interp probe``, ``interp
validate``): ``compute`` on every worker (``interp.distributed.launch``), then ``write`` in the one
process that writes, inside the command's output set (``interp.io.output_dir``). The flags that
drive it (``--workers``, ``--worker-timeout``) are parsed in ``analyses.cli``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["run_with_workers"]


def run_with_workers(
    args: Any, command: str, owns: Sequence[str], compute: Callable, write: Callable, *extra: Any
) -> str | None:
    """``compute(world, args, *extra)`` on every worker (``interp.distributed.launch``: spawned, or this
    process's share under torchrun), then ``write(args, tmp, result, t0, *extra)`` with rank 0's result, in
    the one process that writes (the spawning process, or torchrun's rank 0), inside
    ``output_dir`` (``args.force``, where the command has the flag: replace files of its names that no
    toolkit run wrote). A failed worker fails the run with a message naming it; nothing is written."""
    from interp import distributed
    from interp.io import output_dir

    workers, timeout = getattr(args, "workers", None), getattr(args, "worker_timeout", 300.0)
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be a positive integer, got {workers}")
    if timeout <= 0:
        raise ValueError(f"--worker-timeout must be a positive number of seconds, got {timeout}")
    kw = dict(workers=workers, timeout=timeout, device=getattr(args, "device", None))
    t0 = time.perf_counter()
    if not distributed.is_main_process():  # torchrun's other ranks: their share, no output
        distributed.launch(_quietly, compute, args, *extra, **kw)
        return None
    force = bool(getattr(args, "force", False))
    with output_dir(args.out, owns, command=command, what="--out", force=force) as tmp:
        try:
            result = distributed.launch(_quietly, compute, args, *extra, **kw)
        except distributed.WorkerError as e:
            raise SystemExit(f"{command}: {e}") from None
        return write(args, tmp, result, t0, *extra)


def _quietly(world, compute, args, *extra):
    """``compute`` on one worker; only rank 0 shows progress bars (Hugging Face's included)."""
    if not world.is_main:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    return compute(world, args, *extra)
