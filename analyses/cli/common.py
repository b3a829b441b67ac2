"""What several ``interp`` subcommands share: the arguments ``--dtype``, ``--workers`` and
``--force``, and ``Terminated`` (SIGTERM as an exception). Parsing only (no torch import: ``interp
--help`` stays light)."""

from __future__ import annotations

import argparse

__all__ = ["DTYPE_NAMES", "Terminated", "add_dtype_argument", "add_force_argument", "add_worker_arguments"]


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanups (staging folders, locks) run."""


DTYPE_NAMES = ("float32", "bfloat16", "float16")
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def _dtype_name(value: str) -> str:
    name = value.strip().lower()
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPE_NAMES:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a supported dtype; use {', '.join(DTYPE_NAMES)} (or fp32, bf16, fp16)"
        )
    return name


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """--workers and --worker-timeout (``interp probe`` and ``interp validate``)."""
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes sharing the work over torch.distributed (gloo on CPU, nccl on CUDA), merged exactly: "
        "the same table as one process; default 1, or WORLD_SIZE when started by torchrun",
    )
    parser.add_argument(
        "--worker-timeout",
        type=float,
        default=300.0,
        help="seconds the workers wait for a silent one before the run fails (default 300)",
    )


def add_dtype_argument(parser: argparse.ArgumentParser) -> None:
    """``--dtype`` for every command that loads a model: the name goes to ``models.load(...,
    dtype=)``; analyses accumulate in fp32/fp64 whatever it is. (No torch import: ``interp --help``
    stays light.)"""
    parser.add_argument(
        "--dtype",
        type=_dtype_name,
        default="float32",
        metavar="{float32,bfloat16,float16}",
        help="the model's weights and activations: float32 (default), bfloat16 or float16 (also fp32, bf16, fp16)",
    )


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    """``--force``: let a command replace files of its names in ``--out`` that no toolkit run wrote
    (without it such a folder is refused: ``interp.io.check_recorded``, docs/reliability.md)."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace files of this command's names in --out that no toolkit run wrote (default: refuse)",
    )
