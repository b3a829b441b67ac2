"""The ``interp`` command. Each subcommand lives in its own module, which provides
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when used.

Errors a user can fix (a bad argument, a missing or malformed file, a model that does not exist, an
unusable ``--out``: ``ValueError``, ``OSError`` and ``interp.io.OutputError``, which the library
raises with a one-line message naming the file) are printed as ``interp <command>: message`` with
exit status 2; anything else is a bug and keeps its traceback (``INTERP_TRACEBACK=1`` shows the
traceback for every error). An interrupt (Ctrl-C, or SIGTERM) exits with status 130 (143) after the
command's cleanup: its output folder is left as it was before the run."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import time

SUBCOMMANDS = {
    "tour": ("analyses.cli.tour", "the model, its hooks and shapes, one attention pattern as a PNG"),
    "probe": ("analyses.cli.probe", "classify every head (head-probing report)"),
    "invariance": ("analyses.cli.invariance", "permutation, rotation, relative-position and sqrt(d) checks"),
    "validate": ("analyses.cli.validate", "causal validation of head labels by ablation"),
    "train": ("analyses.cli.train", "train the toolkit's transformer from a config file"),
    "summary": ("analyses.cli.summary", "one page over the main job's outputs: comparison, invariances, validation"),
    "explore": ("analyses.cli.explore", "a local web page that runs the model on the text you type"),
}


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanups (staging folders, locks) run."""


def _on_sigterm(signum, frame):
    raise Terminated


def _user_errors() -> tuple[type[BaseException], ...]:
    from interp.io import OutputError  # light: no torch, no pandas

    return (ValueError, OSError, OutputError)


def _one_line(e: BaseException) -> str:
    return " ".join((str(e) or type(e).__name__).split())


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


def run_with_workers(args, command: str, owns, compute, write, *extra) -> str | None:
    """``compute(world, args, *extra)`` on every worker (``interp.distributed.launch``: spawned, or this
    process's share under torchrun), then ``write(args, tmp, result, t0, *extra)`` with rank 0's result, in
    the one process that writes (the spawning process, or torchrun's rank 0), inside
    ``output_dir``. A failed worker fails the run with a message naming it; nothing is written."""
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
    with output_dir(args.out, owns, command=command, what="--out") as tmp:
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="interp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_missing=module)
            continue
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    args = parser.parse_args(argv)
    if getattr(args, "_missing", None):
        parser.error(f"'{args.command}' is not available in this build ({args._missing} is missing)")
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write(f"interp {args.command}: interrupted; its output folder was left as it was\n")
        return 130
    except Terminated:
        sys.stderr.write(f"interp {args.command}: terminated; its output folder was left as it was\n")
        return 143
    except _user_errors() as e:
        if os.environ.get("INTERP_TRACEBACK"):
            raise
        sys.stderr.write(f"interp {args.command}: {_one_line(e)}\n")
        return 2
    finally:
        if main_thread and previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
