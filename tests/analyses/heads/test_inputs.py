"""The probe's input items (issues 23 and 24): the user's own files as sources, refusals before any
forward pass that name FILE:LINE, pipes, the command line's exit status and help."""

from __future__ import annotations

import os
import threading

import pytest

from analyses import data, heads
from analyses.cli import main
from analyses.heads import report
from tests.factories import N_CTX, planted_model


def _conllu_sentence(words: list[str], verb: int, subject: int, sent_id: str) -> str:
    """A CoNLL-U sentence: ``words[verb]`` is the root, ``words[subject]`` its nsubj, the rest hang on the verb."""
    lines = [f"# sent_id = {sent_id}"]
    for k, w in enumerate(words, 1):
        head, rel = (0, "root") if k == verb + 1 else (verb + 1, "nsubj" if k == subject + 1 else "dep")
        lines.append(f"{k}\t{w}\t_\tNOUN\tNN\t_\t{head}\t{rel}\t_\t_")
    return "\n".join(lines) + "\n\n"


SHORT = ["the", "cat", "sleeps", "."]


@pytest.fixture
def long_treebank(tmp_path):
    """Three short sentences, then one of 10,000 words starting at a known line."""
    text = "".join(_conllu_sentence(SHORT, 2, 1, f"s{k}") for k in range(3))
    start = text.count("\n") + 1  # the long sentence's first line (its sent_id comment)
    text += _conllu_sentence(["the", "dog"] + ["old"] * 9997 + ["runs"], 9999, 1, "long")
    path = tmp_path / "long.conllu"
    path.write_text(text, encoding="utf-8")
    return path, start


def test_an_over_long_sentence_is_refused_before_any_forward_pass_naming_file_and_line(long_treebank, monkeypatch):
    path, start = long_treebank
    items = data.read_conllu(path)
    assert [len(it.words) for it in items] == [4, 4, 4, 10000]

    def forward(self, batch, fwd_hooks):
        raise AssertionError("a forward pass ran before the over-long sentence was refused")

    monkeypatch.setattr(heads.Adapter, "forward", forward)
    with pytest.raises(ValueError, match=rf"^{path}:{start} has 10000 words, more than the context .*n_ctx={N_CTX}"):
        heads.probe_items(planted_model(), items, n_repeat=0, null_model=False, weighting=("attention",))


def test_a_sentence_too_long_in_tokens_names_its_file_and_line(tmp_path):
    # one word more than the planted model's context (n_ctx=16), in the file's second sentence (line 7)
    text = _conllu_sentence(SHORT, 2, 1, "a") + _conllu_sentence(["the", "cat"] + ["old"] * 14 + ["sleeps"], 16, 1, "b")
    path = tmp_path / "t.conllu"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}:7 has 17 words"):
        heads.probe_items(
            planted_model(), data.read_conllu(path), n_repeat=0, null_model=False, weighting=("attention",)
        )


def test_a_one_word_conllu_file_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "one.conllu"
    path.write_text("1\tHello\thello\tINTJ\tUH\t_\t0\troot\t_\t_\n", encoding="utf-8")
    rc = main(["probe", "--out", str(tmp_path / "out"), "--sources", f"conllu={path}", "--no-null"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("interp probe: ") and "no nsubj arcs" in err and str(path) in err


def test_a_malformed_n_for_exits_2(tmp_path, capsys):
    rc = main(["probe", "--out", str(tmp_path / "out"), "--n-for", "anaphora=lots"])
    assert rc == 2 and capsys.readouterr().err.startswith("interp probe: --n-for 'anaphora=lots'")


def _serve_fifo(path, text: str) -> threading.Thread:
    os.mkfifo(path)

    def write():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def _release(path, t: threading.Thread) -> None:
    if t.is_alive():  # nobody read the pipe: open it once so the writer is not left blocked
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        t.join(5)
        os.close(fd)


def test_a_pipe_is_read_as_a_conllu_file(tmp_path):
    fifo = tmp_path / "pipe"
    text = _conllu_sentence(SHORT, 2, 1, "p")
    t = _serve_fifo(fifo, text)
    try:
        items = data.read_conllu(fifo)
    finally:
        _release(fifo, t)
    assert [(it.words, it.query, it.target) for it in items] == [(tuple(SHORT), 2, 1)]
    assert items[0].info["sentence_line"] == 1 and items[0].source == f"conllu:{fifo}"


def test_sources_take_the_users_files_alone(tmp_path):
    path = tmp_path / "mine.conllu"
    path.write_text(_conllu_sentence(SHORT, 2, 1, "a") + _conllu_sentence(["the", "dog", "runs"], 2, 1, "b"))
    for spec in (f"conllu={path}", [f"conllu:{path}"]):
        items = data.load_items(n=5, sources=spec)
        assert [it.source for it in items] == [f"conllu:{path}"] * 2  # no generated items
    both = data.load_items(n=5, sources=f"generated,conllu={path}")
    assert {it.source.split(":")[0] for it in both} >= {"generated", "conllu"}


@pytest.mark.parametrize(
    "spec,msg",
    [
        ("conllu", "data source 'conllu' needs its file: conllu=FILE"),
        ("text=", "data source 'text' needs its file: text=FILE"),
        (
            "generated,poems",
            "unknown data source 'poems'; known: clauses, generated, ioi, pairs, sonnets, spacy, winobias, xsum, "
            "conllu=FILE",
        ),
        ("conllu=/no/such/file.conllu", "CoNLL-U file not found: /no/such/file.conllu"),
    ],
)
def test_bad_sources_say_what_would_be_right(spec, msg):
    with pytest.raises((ValueError, FileNotFoundError), match=msg.replace("(", r"\(")):
        data.parse_sources(spec)


def test_bad_sources_on_the_command_line_exit_2_before_the_output_folder_is_touched(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["probe", "--out", str(out), "--sources", "conllu"])
    assert rc == 2 and capsys.readouterr().err == "interp probe: data source 'conllu' needs its file: conllu=FILE\n"
    assert not out.exists()


def test_help_lists_every_source(capsys):
    with pytest.raises(SystemExit) as e:
        main(["probe", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in ("generated", "winobias", "spacy", "xsum", "sonnets", "conllu=FILE", "text=FILE"):
        assert name in text


def test_plain_text_is_parsed_into_subject_verb_items_with_their_lines(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("The cat sleeps on the mat.\n\nMy sister lives in Paris.\n", encoding="utf-8")
    items = data.load_items(n=5, sources=f"text={path}")
    got = [(it.words[it.query], it.words[it.target], it.info["line"]) for it in items]
    assert got == [("sleeps", "cat", 1), ("lives", "sister", 3)]
    assert {it.source for it in items} == {f"text:{path}"} and {it.info["family"] for it in items} == {"text"}


def test_the_report_names_the_users_file_and_its_sentence_count(tmp_path):
    path = tmp_path / "mine.conllu"
    sentences = [_conllu_sentence(SHORT, 2, 1, f"s{k}") for k in range(2)]
    sentences.append(_conllu_sentence(["the", "dog", "runs", "."], 2, 1, "s3"))
    path.write_text("".join(sentences), encoding="utf-8")
    df = heads.probe_items(
        planted_model(), data.read_conllu(path), n_repeat=0, null_model=False, n_boot=10, weighting=("attention",)
    )
    assert df.attrs["user_files"] == {str(path): {"kind": "conllu", "sentences": 3, "items": 3}}
    assert f"Your data: `{path}`, 3 sentences, 3 subject-verb items from CoNLL-U" in report._data_text(df.attrs)


def test_the_norm_lens_does_not_depend_on_the_order_the_hooks_fire_in(monkeypatch):
    """Each layer is reduced once its pattern and its values are both in, whichever comes first:
    feeding every layer's pattern before its values gives the same table, bitwise."""
    from types import SimpleNamespace

    from tests.factories import planted_items

    m = planted_model(values=True)
    kw = dict(n_repeat=12, seed=0, n_boot=20, null_model=False, weighting=("attention", "norm"))
    items = planted_items(24, seed=3)
    usual = heads.probe_items(m, items, **kw)

    def values_last(self, batch, fwd_hooks):
        names = [name for name, _ in fwd_hooks]
        _, cache = self.model.run_with_cache(
            batch.input_ids, attention_mask=batch.attention_mask, names_filter=lambda n: n in names
        )
        for name, fn in sorted(fwd_hooks, key=lambda h: h[0].endswith("hook_v")):  # patterns first
            fn(cache[name], hook=SimpleNamespace(name=name))

    monkeypatch.setattr(heads.Adapter, "forward", values_last)
    reordered = heads.probe_items(m, items, **kw)
    assert (usual["weighting"] == "norm").any()
    assert usual.equals(reordered)


def test_a_run_counts_the_words_its_tokenizer_lost_or_changed(minilm, capsys):
    """Issue 24 item 13: Japanese on MiniLM loses 猫 and 魚 to [UNK] and normalises が to か; the probe
    run counts them once (df.attrs, the report's data paragraph) instead of saying nothing."""
    import warnings

    from analyses.data.items import Item, keep_tokenizable
    from analyses.heads.report import _data_text
    from models.tokenizer import LostWordsWarning

    items = [Item(("猫", "が", "魚", "を", "見る"), "delimiter"), Item(("the", "cat", "sleeps", "."), "delimiter")]
    counts: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LostWordsWarning)
        keep_tokenizable(items, minilm.tokenizer, counts=counts)
    assert counts["words"] == 9 and counts["lost"] >= 2 and counts["changed"] >= 1
    assert counts["lost"] + counts["changed"] <= 5  # the English sentence loses nothing
    assert f"lost {counts['lost']} of 9 words" in _data_text({"word_losses": counts})
    assert "lost" not in _data_text({"word_losses": {"words": 4, "lost": 0, "changed": 0}})
