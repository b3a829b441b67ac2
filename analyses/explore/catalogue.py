"""The head catalogue in the explorer: ``interp explore --catalogue`` shows, beside a clicked head's
pattern, the verdicts ``interp catalogue`` gave it (per task: the verdict, the effect and its 95%
interval against the minimum effect, where it was measured, and the labelled roles behind it).

``read`` checks the file before the model is loaded (``checked``: a missing file, a file that is not
a catalogue.csv: one line naming the file and what is wrong); ``check_model`` checks it against the
loaded model (a catalogue of another model is refused, as ``--heads`` refuses another model's
heads.csv); ``by_head`` turns it into what the server sends for a head, JSON-safe (an empty cell is
null, never NaN). Nothing here prints, and the page puts every string it gets as text."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

__all__ = ["NEEDED", "read", "checked", "check_model", "by_head", "summary"]

# the columns the head's panel shows (a catalogue.csv has them all: ``analyses.catalogue.COLUMNS``)
NEEDED = ("model", "layer", "head", "task", "verdict", "effect", "ci_low", "ci_high", "min_effect", "site", "roles")
_NUMBERS = ("effect", "ci_low", "ci_high", "min_effect", "n_pairs", "rank", "eap_ig", "eap_ig_rank", "powered_effect")
_TEXTS = ("metric", "primary", "state", "reason", "powered_verdict")
_RUN = "run `interp catalogue --model MODEL --out DIR` and pass DIR/catalogue.csv"


def _one_line(e: BaseException) -> str:
    return " ".join((str(e) or type(e).__name__).split())


def read(path: str | Path) -> pd.DataFrame:
    """The catalogue at ``path`` (a catalogue.csv, or the folder holding one), ``checked``; its
    ``attrs["source"]`` is the file read. ``FileNotFoundError`` or ``ValueError`` with one line
    naming the file otherwise."""
    from analyses.catalogue import read_catalogue

    given = Path(path)
    file = given / "catalogue.csv" if given.is_dir() else given
    if not file.is_file():
        where = f"{given} holds no catalogue.csv" if given.is_dir() else f"{given}: no such file"
        raise FileNotFoundError(f"{where}; {_RUN}")
    try:
        table = read_catalogue(file)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{file} is not a catalogue.csv (not a CSV table: {_one_line(e)})") from None
    except ValueError as e:  # read_catalogue's own check: the join keys or the verdict missing
        raise ValueError(f"{_one_line(e)}; {_RUN}") from None
    return checked(table, str(file))


def checked(table: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """A copy of ``table`` once it has passed as a catalogue: every column the panel shows (``NEEDED``),
    whole non-negative layer and head numbers, numbers where a catalogue has them, only the verdicts
    of ``analyses.catalogue.VERDICTS``, one model. ``source`` names it in errors and in the page."""
    from analyses.catalogue import VERDICTS

    name = source or table.attrs.get("source") or "the catalogue"
    table = table.copy()
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise ValueError(f"{name} lacks columns {missing}: not a catalogue.csv; {_RUN}")
    if table.empty:
        raise ValueError(f"{name} holds no rows: an empty catalogue; {_RUN}")
    for col in ("layer", "head"):
        values = pd.to_numeric(table[col], errors="coerce")
        bad = values.isna() | (values < 0) | (values != values.round())
        if bad.any():
            raise ValueError(f"{name}: column {col} holds {table[col][bad].iloc[0]!r}, not a head number")
        table[col] = values.astype(int)
    for col in (c for c in _NUMBERS if c in table.columns):
        values = pd.to_numeric(table[col], errors="coerce")
        bad = values.isna() & table[col].notna() & (table[col].astype(str) != "")
        if bad.any():
            raise ValueError(f"{name}: column {col} holds {table[col][bad].iloc[0]!r}, not a number")
        table[col] = values.astype(float)
    unknown = sorted(set(table["verdict"].astype(str)) - set(VERDICTS))
    if unknown:
        raise ValueError(f"{name}: unknown verdicts {unknown} (a catalogue's are {list(VERDICTS)})")
    names = sorted(set(table["model"].astype(str)))
    if len(names) > 1:
        raise ValueError(f"{name} holds the rows of several models {names}; pass one model's catalogue.csv")
    table.attrs["source"] = name
    return table


def check_model(table: pd.DataFrame, name: str, n_layers: int, n_heads: int) -> None:
    """``ValueError`` unless ``table`` is the catalogue of the model named ``name`` with ``n_layers``
    layers of ``n_heads`` heads (its rows name the model; its heads fit the model's shape)."""
    source = table.attrs.get("source", "the catalogue")
    names = sorted(set(table["model"].astype(str)))
    if names != [name]:
        raise ValueError(
            f"{source} is the catalogue of model {', '.join(names)}, not of {name!r}, the model explored; "
            f"pass {name}'s catalogue.csv (interp catalogue --model {name})"
        )
    layer, head = int(table["layer"].max()), int(table["head"].max())
    if layer >= n_layers or head >= n_heads:
        raise ValueError(
            f"{source} has heads up to layer {layer}, head {head}, but {name} has {n_layers} layers of {n_heads} "
            "heads: it is another model's catalogue"
        )


def _number(x):
    if x is None or isinstance(x, str):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _text(x) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def _row(r: dict) -> dict:
    from analyses.catalogue import NO_TASK

    out = {
        "task": _text(r["task"]),
        "no_task": _text(r["task"]) == NO_TASK,
        "verdict": _text(r["verdict"]),
        "site": _text(r["site"]),
        "roles": [s for s in _text(r["roles"]).split("; ") if s],
        "other_roles": [s for s in _text(r.get("other_roles")).split("; ") if s],
    }
    for key in _NUMBERS:
        out[key] = _number(r.get(key))
    for key in _TEXTS:
        out[key] = _text(r.get(key))
    for key in ("n_pairs", "sign"):  # a count and a sign: whole numbers
        x = _number(r.get(key))
        out[key] = None if x is None else int(x)
    return out


def by_head(table: pd.DataFrame) -> dict[str, list[dict]]:
    """``"layer.head"`` -> the head's rows (``_row``: JSON-safe), in the file's task order with the
    ``NO_TASK`` row (roles no solved task tests) last. A head without rows has no key."""
    from analyses.catalogue import NO_TASK

    out: dict[str, list[dict]] = {}
    for r in table.to_dict("records"):
        out.setdefault(f"{int(r['layer'])}.{int(r['head'])}", []).append(_row(r))
    for rows in out.values():
        rows.sort(key=lambda row: row["task"] == NO_TASK)  # stable: the file's order otherwise
    return out


def summary(table: pd.DataFrame) -> dict:
    """What the page says about the catalogue as a whole: the file, the model, its tasks (in the
    file's order, without ``NO_TASK``), how many rows and heads, and the verdicts in their order."""
    from analyses.catalogue import NO_TASK, VERDICTS

    tasks = [t for t in dict.fromkeys(table["task"].astype(str)) if t != NO_TASK]
    return {
        "source": table.attrs.get("source", ""),
        "model": str(table["model"].iloc[0]),
        "tasks": tasks,
        "rows": int(len(table)),
        "heads": int(table[["layer", "head"]].drop_duplicates().shape[0]),
        "verdicts": list(VERDICTS),
    }
