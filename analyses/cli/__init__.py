"""The ``interp`` command. Each subcommand lives in its own module, which provides
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when used."""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "tour": ("analyses.cli.tour", "the model, its hooks and shapes, one attention pattern as a PNG"),
    "probe": ("analyses.cli.probe", "classify every head (head-probing report)"),
    "invariance": ("analyses.cli.invariance", "permutation, rotation, relative-position and sqrt(d) checks"),
    "validate": ("analyses.cli.validate", "causal validation of head labels by ablation"),
    "train": ("analyses.cli.train", "train the toolkit's transformer from a config file"),
    "summary": ("analyses.cli.summary", "one page over the main job's outputs: comparison, invariances, validation"),
}


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
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
