"""What every ``interp`` subcommand shares: its flags (one help text and one default rule each), the
two helpers through which a command's ``run`` reads them (``load_model``, ``threads``), the OpenMP
wait policy, and ``Terminated`` (SIGTERM as an exception).

The flags, command by command (``tests/analyses/cli/test_flags.py`` reads them off the parsers):

- ``--model``, ``--device``, ``--dtype``, ``--threads`` (``add_model_arguments``): every command
  that loads a model (tour, probe, invariance, validate, circuit, agreement, sinks, retrieval, explore).
  ``--model`` is minilm, smollm2, gemma3, a model or checkpoint folder, or a Hugging Face hub id; it
  defaults to smollm2 where the command needs a causal LM (circuit, agreement, sinks, retrieval) and to minilm
  elsewhere; no command requires it. ``--threads`` is set when the command starts and the previous
  count put back when it ends (``threads``, entered by ``interp``'s ``main`` around every command).
- ``--force``: every command that writes a folder (all but explore); ``interp train``'s former
  ``--overwrite`` is a hidden alias that warns.
- ``--seed``: the seed of every random draw of a run (default 0), on the commands that draw (probe,
  invariance, validate, circuit, agreement, sinks, retrieval); tour and explore draw nothing, train reads its
  seed from the config's [training] table, positional its seeds from the budget.
- ``--text`` is a string (tour, invariance: the input); a file of sentences is ``--text-file``
  (probe; its former ``--text`` is a hidden alias that warns).
- ``--workers``, ``--worker-timeout``: probe and validate only, the two commands that shard their
  work over processes.
- summary loads no model (``--out``, ``--force``); train trains one (``--force``, no ``--model``);
  positional trains its own (``--force``; one torch thread per run, so no ``--threads``).

Parsing only at import (no torch: ``interp --help`` stays light); ``load_model`` and ``threads``
import torch when called."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Iterator

__all__ = [
    "CAUSAL_DEFAULT",
    "DEFAULT_MODEL",
    "DTYPE_NAMES",
    "MODEL_HELP",
    "Terminated",
    "add_deprecated_alias",
    "add_dtype_argument",
    "add_force_argument",
    "add_model_arguments",
    "add_seed_argument",
    "add_text_argument",
    "add_worker_arguments",
    "comma_list",
    "finite_float",
    "load_model",
    "passive_openmp",
    "positive_int",
    "probability",
    "share",
    "threads",
]


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanups (staging folders, locks) run."""


DTYPE_NAMES = ("float32", "bfloat16", "float16")
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}

DEFAULT_MODEL = "minilm"  # the default of every command that does not need a causal LM
CAUSAL_DEFAULT = "smollm2"  # ... and of those that do
MODEL_HELP = (
    "minilm, smollm2, gemma3, a model or checkpoint folder, or a Hugging Face hub id (owner/name, from the "
    "local cache); default here %(default)s (the rule: smollm2 where a command needs a causal LM, else minilm)"
)
DEVICE_HELP = "torch device: cpu (default), cuda, cuda:1, mps"
THREADS_HELP = (
    "torch CPU threads while the command runs (default: torch's choice; 1 is much faster on an "
    "oversubscribed machine; --workers share them); the previous count is restored when it ends"
)
FORCE_HELP = (
    "replace files of this command's names in --out that no toolkit run wrote (train: also a checkpoint "
    "already there); default: refuse"
)
TEXT_HELP = "the input text, a string (default: a built-in English sentence)"
SEED_HELP = "seed of every random draw of the run (sampling, shuffles, nulls, bootstraps); default 0"


def _dtype_name(value: str) -> str:
    name = value.strip().lower()
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPE_NAMES:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a supported dtype; use {', '.join(DTYPE_NAMES)} (or fp32, bf16, fp16)"
        )
    return name


def add_model_arguments(parser: argparse.ArgumentParser, causal: bool = False) -> None:
    """``--model`` (default smollm2 when ``causal``: the command needs a causal LM; else minilm),
    ``--device``, ``--dtype`` and ``--threads``: every command that loads a model takes all four."""
    parser.add_argument("--model", default=CAUSAL_DEFAULT if causal else DEFAULT_MODEL, help=MODEL_HELP)
    parser.add_argument("--device", default="cpu", help=DEVICE_HELP)
    add_dtype_argument(parser)
    parser.add_argument("--threads", type=int, default=None, help=THREADS_HELP)


def add_dtype_argument(parser: argparse.ArgumentParser) -> None:
    """``--dtype`` (part of ``add_model_arguments``): the name goes to ``models.load(...,
    dtype=)``; analyses accumulate in fp32/fp64 whatever it is."""
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
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)


def add_seed_argument(parser: argparse.ArgumentParser) -> None:
    """``--seed`` (default 0): the one seed of a run's random draws, on every command that draws."""
    parser.add_argument("--seed", type=int, default=0, help=SEED_HELP)


def add_text_argument(parser: argparse.ArgumentParser) -> None:
    """``--text``: the input, a string (tour, invariance); a file of text is ``--text-file`` (probe)."""
    parser.add_argument("--text", default=None, help=TEXT_HELP)


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


def add_deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str, **kwargs) -> None:
    """A hidden flag ``old`` that stores into ``dest`` (the flag ``new``'s) and warns on stderr that
    it is deprecated: a renamed flag keeps working. ``kwargs``: what ``new`` was added with (``nargs=0``
    for a switch)."""
    switch = kwargs.pop("nargs", None) == 0

    class Alias(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            sys.stderr.write(f"{parser.prog}: warning: {old} is deprecated; use {new}\n")
            setattr(namespace, self.dest, True if switch else values)

    parser.add_argument(old, dest=dest, action=Alias, nargs=0 if switch else None, help=argparse.SUPPRESS, **kwargs)


def comma_list(text: str) -> list[str]:
    """A comma-separated list of names (``--kinds text,order``); blanks dropped, at least one name."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of names, got {text!r}")
    return names


def positive_int(text: str) -> int:
    """A flag's ``type=`` for a count: a whole number >= 1 (argparse names the flag in its error)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give one >= 1") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} must be at least 1")
    return v


def finite_float(text: str) -> float:
    """A flag's ``type=`` for a number: finite (not nan or inf)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return v


def share(text: str) -> float:
    """A flag's ``type=`` for a share (an accuracy): a number in [0, 1]."""
    v = finite_float(text)
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{v:g} is not a share in [0, 1] (e.g. 0.7)")
    return v


def probability(text: str) -> float:
    """A flag's ``type=`` for a significance level: a number strictly between 0 and 1."""
    v = finite_float(text)
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"{v:g} is not a probability strictly between 0 and 1 (e.g. 0.05)")
    return v


def load_model(args: argparse.Namespace, causal: bool = False):
    """``args.model`` loaded on ``args.device`` in ``args.dtype``, in eval mode: how every command
    loads its model. ``causal``: the command needs a causal LM with an LM head (refused otherwise, in
    one line naming the command and the model)."""
    import models

    model = models.load(args.model, device=getattr(args, "device", "cpu"), dtype=args.dtype).eval()
    if causal and not (model.cfg.is_causal and model.cfg.lm_head):
        command = getattr(args, "command", None) or "this command"
        raise ValueError(f"--model {args.model}: interp {command} needs a causal LM with an LM head (e.g. smollm2)")
    return model


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    """torch's CPU thread count set to ``n`` for the block (None: left as it is, and torch not even
    imported), the previous count put back afterwards, however the block ends: a command may run
    inside a longer process (a notebook, the tests). ``interp``'s ``main`` enters it around every
    command with ``--threads``."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"--threads must be a positive number of torch CPU threads, got {n}")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def passive_openmp(restart: bool = False) -> None:
    """``OMP_WAIT_POLICY=PASSIVE`` unless the user set it (then theirs stays). OpenMP threads that
    spin while they wait for work (GNU OpenMP's default) collapse on a machine with more runnable
    processes than cores: a SmolLM2 forward of 16 short prompts took 12-25 s on 2 threads under a
    load of 12, 0.5-0.8 s with passive waiting (docs/circuits.md). OpenMP reads it once, when torch
    loads it: so this runs before torch is imported (``interp``'s ``main``); in a process that has
    imported torch already it changes nothing, unless ``restart``: then, the variable being unset,
    it sets it and starts the interpreter again with the same arguments (``python -m
    analyses.positional``, whose package imports torch before its ``__main__`` runs)."""
    if "OMP_WAIT_POLICY" in os.environ:
        return
    if "torch" not in sys.modules:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    elif restart:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
