"""``interp explore``: the session's numbers against the model's own hooks and ``run_ablated``, the
API's answers to bad input, the Host check, parallel requests, and the page in Debian's Chromium
(Playwright, ``executable_path``; never a downloaded browser): once against ``interp explore`` itself
on a tiny folder model (started as a subprocess, stopped with Ctrl-C), once against SmolLM2.

Every server is stopped by its test, and the test checks that nothing listens on its port afterwards.
Screenshots go to pytest's tmp folder, or to ``$INTERP_TEST_ARTIFACTS`` when set."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import torch

import models
from analyses.explore.server import MAX_BODY, allowed_hosts, create_app
from analyses.explore.session import Session
from analyses.heads.adapter import model_input
from analyses.heads.examples import readable_sentences
from analyses.heads.roles import COLUMNS
from analyses.heads.scoring import norm_weighted, value_norms
from interp.alignment import word_attention
from interp.display import token_label
from interp.interventions import ablation_source, cache_z, run_ablated
from tests.factories import VOCAB, randomized, tiny_config, word_tokenizer

TEXT = "the cat near the old box sleeps ."


def _tiny_lm() -> models.Transformer:
    """A causal LM over the factories' word vocabulary (one token per word), context 16."""
    m = randomized(tiny_config(d_vocab=len(VOCAB), n_ctx=16, name="tiny"), seed=1)
    m.tokenizer = word_tokenizer()
    return m.eval()


@pytest.fixture(scope="module")
def tiny_lm():
    return _tiny_lm()


@pytest.fixture(scope="module")
def client(tiny_lm):
    from starlette.testclient import TestClient

    app = create_app(Session(tiny_lm), allowed_hosts("127.0.0.1", 8765))
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        yield c


def _heads_table() -> pd.DataFrame:
    """A heads.csv for the tiny LM as `interp probe` writes it, by hand: L1H2 is a labelled
    previous-token head, L0H3 only idles on the sink (attention_sink), nothing else is labelled."""
    rows = []
    labels = {(1, 2, "previous_token"), (0, 3, "attention_sink")}
    for layer in range(2):
        for head in range(4):
            for role in ("previous_token", "local", "attention_sink"):
                labelled = (layer, head, role) in labels
                score = 0.9 if labelled else 0.2
                rows.append(
                    dict(model="tiny", layer=layer, head=head, role=role, direction="all", metric="accuracy",
                         score=score, baseline=0.25, margin=0.05, n=40, p_value=1e-6 if labelled else 0.5,
                         p_adjusted=1e-5 if labelled else 1.0, label=labelled, source="all", subset="all",
                         specials="-", family=role, weighting="attention")
                )  # fmt: skip
    df = pd.DataFrame(rows)
    for col in COLUMNS:  # the columns a hand-made table does not need: empty, as the probe leaves them
        if col not in df:
            df[col] = float("nan")
    return df[COLUMNS]


def _words(model, text):
    """``text`` under the model's one input convention (``model_input``: SmolLM2's starts with
    <|endoftext|>; the tiny word-level model's and MiniLM's as their tokenizers make them)."""
    return model_input(model.tokenizer)[0](text)


def _cached(model, text: str):
    """The model's own hooks on ``text`` (its input convention): every pattern and value, as
    ``run_with_cache`` gives them."""
    _, cache = model.run_with_cache(_words(model, text).input_ids)
    return cache


def _norm_lens(model, cache, layer: int) -> torch.Tensor:
    w_o = model.blocks[layer].attn.W_O.detach().float()
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
    return norm_weighted(pattern, value_norms(cache[f"blocks.{layer}.attn.hook_v"], w_o))[0]


def _reference_mean(model, layers) -> dict:
    tok = model_input(model.tokenizer)[0]
    ref = tok.words([list(s.words) for s in readable_sentences(tok)])
    _, z = cache_z(model, ref.input_ids, layers, attention_mask=ref.attention_mask)
    return ablation_source(z, "mean", attention_mask=ref.attention_mask)


def _expected_change(model, text: str, heads, mode: str, target: int | None = None, position: int = -1):
    """(target id, ablated - clean logit) from ``run_ablated``, the mean over the reference set."""
    b = _words(model, text)
    n = b.input_ids.shape[1]
    source = None
    if mode == "mean":
        src = _reference_mean(model, {l for l, _ in heads})
        source = {l: v[:1, :1].expand(1, n, *v.shape[2:]) for l, v in src.items()}
    with torch.no_grad():
        clean = model(b.input_ids, attention_mask=b.attention_mask)[0, position]
        ablated = run_ablated(model, b.input_ids, heads, mode, attention_mask=b.attention_mask, source=source)
    target = int(clean.argmax()) if target is None else target
    return target, float(ablated[0, position, target]) - float(clean[target])


# -- the session's numbers ----------------------------------------------------------------------------


def test_head_is_the_models_own_pattern_norm_lens_and_words(client, tiny_lm):
    cache = _cached(tiny_lm, TEXT)
    b = _words(tiny_lm, TEXT)
    for layer, head in ((0, 3), (1, 2)):
        d = client.post("/api/head", json={"text": TEXT, "layer": layer, "head": head}).json()
        assert d["tokens"] == b.tokens[0] and d["token_to_word"] == b.token_to_word[0]
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0, head]
        assert torch.equal(torch.tensor(d["pattern"], dtype=torch.float32), pattern)
        norm = _norm_lens(tiny_lm, cache, layer)[head]
        assert torch.equal(torch.tensor(d["norm"], dtype=torch.float32), norm)
        assert not torch.equal(norm, pattern)  # the lens is not the weights again
        words = word_attention(pattern, b.token_to_word[0], len(b.words[0]))
        assert torch.equal(torch.tensor(d["pattern_words"], dtype=torch.float32), words)
    lv = client.post("/api/layer", json={"text": TEXT, "layer": 1, "query": 5}).json()
    assert torch.equal(torch.tensor(lv["pattern"]), cache["blocks.1.attn.hook_pattern"][0, :, 5].double())


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablation_is_run_ablated(client, tiny_lm, mode):
    heads = [[1, 2], [0, 1]]
    r = client.post("/api/ablate", json={"text": TEXT, "heads": heads, "mode": mode}).json()
    target, change = _expected_change(tiny_lm, TEXT, [(0, 1), (1, 2)], mode)
    assert (r["target_id"], r["logit_change"]) == (target, change) and change != 0
    assert (r["reference"] is None) == (mode == "zero")
    if mode == "mean":
        assert "EXAMPLE_SENTENCES" in r["reference"]
    dog = VOCAB.index("dog")
    r = client.post("/api/ablate", json={"text": TEXT, "heads": heads, "mode": mode, "target": "dog", "position": 2})
    assert r.json()["logit_change"] == _expected_change(tiny_lm, TEXT, [(0, 1), (1, 2)], mode, dog, 2)[1]


def test_encoder_reports_hidden_state_change(minilm):
    """MiniLM has no LM head: the change of the token's final hidden state, as run_ablated gives it."""
    s = Session(minilm)
    text = "The keys to the cabinet are on the table."
    r = s.ablate(text, [[2, 5]], "zero", position=3)
    b = minilm.to_words(text)
    kw = dict(attention_mask=b.attention_mask, token_type_ids=b.token_type_ids)
    with torch.no_grad():
        clean = minilm(b.input_ids, **kw)[0, 3].double()
        ablated = run_ablated(minilm, b.input_ids, [(2, 5)], "zero", **kw)[0, 3].double()
    assert r["token_change"] == float((ablated - clean).norm() / clean.norm()) > 0
    assert "logit_change" not in r and not s.info()["causal"] and "next_token" not in s.run(text)


# -- bad input ----------------------------------------------------------------------------------------


@contextmanager
def _counting_forwards(model):
    calls = []
    handle = model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        yield calls
    finally:
        handle.remove()


def test_role_map_from_heads_csv(tiny_lm):
    roles = Session(tiny_lm, heads=_heads_table()).info()["heads"]
    assert roles["1.2"]["primary"] == "previous_token" and roles["1.2"]["evidence"][0]["p_adjusted"] == 1e-5
    assert roles["0.0"] == {"primary": "unclassified", "secondary": [], "standardised": None, "evidence": []}
    assert Session(tiny_lm).info()["heads"] is None
    assert Session(tiny_lm).info()["input"] == "as tokenised (no sink token)"  # no special token to put first
    with pytest.raises(ValueError, match="another model's heads.csv"):
        Session(tiny_lm, heads=_heads_table().assign(layer=5))
    with pytest.raises(ValueError, match=r"lacks columns \['source'\]"):
        Session(tiny_lm, heads=_heads_table().drop(columns="source"))


def test_too_long_text_is_refused_before_any_forward_pass(client, tiny_lm):
    long = " ".join(["cat"] * 17)  # 17 tokens > the context of 16
    with _counting_forwards(tiny_lm) as calls:
        for route, extra in (("run", {}), ("head", {"layer": 0, "head": 0}), ("ablate", {"heads": [[0, 0]]})):
            r = client.post(f"/api/{route}", json={"text": long, **extra})
            assert r.status_code == 413 and "17 tokens, more than 16 (the model's context)" in r.json()["error"]
        r = client.post("/api/run", json={"text": "cat " * 5000})  # refused before tokenising too
        assert r.status_code == 413 and "characters" in r.json()["error"]
        budget = Session(tiny_lm, max_tokens=5)
        with pytest.raises(ValueError, match=r"6 tokens, more than 5 \(the token budget \(--max-tokens\)\)"):
            budget.run("the cat of the mat sleeps")
    assert calls == []


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"text": ""}, 422, "text is empty"),
        ({"text": "   \n"}, 422, "text is empty"),
        ({"text": 3}, 422, "text must be a string"),
        ({}, 400, "missing field(s) ['text']"),
        ({"text": "cat", "path": "/etc/passwd"}, 400, "unknown field(s) ['path']"),
    ],
)
def test_bad_fields(client, body, status, message):
    r = client.post("/api/run", json=body)
    assert r.status_code == status and message in r.json()["error"]


def test_bad_head_mode_target(client):
    def err(**body):
        r = client.post("/api/ablate", json={"text": TEXT, "heads": [[0, 0]], **body})
        assert r.status_code == 422
        return r.json()["error"]

    assert "layer must be an integer in 0..1" in err(heads=[[2, 0]])
    assert "head must be an integer in 0..3" in err(heads=[[0, -1]])
    assert "[layer, head] pair" in err(heads=[[0]])
    assert "mode must be one of ['zero', 'mean']" in err(mode="resample")
    assert "target token '<b>x</b>' is not in the vocabulary" in err(target="<b>x</b>")
    assert "position must be a token index in 0..7" in err(position=8)
    r = client.post("/api/layer", json={"text": TEXT, "layer": 0, "query": 99})
    assert r.status_code == 422 and "query must be a token index in 0..7" in r.json()["error"]


def test_a_bad_target_is_refused_before_any_forward_pass(client, tiny_lm):
    """Issue 41: the table promises every bad input is checked before any forward pass, but a target
    not in the vocabulary (or not a token) was refused after the clean and ablated passes."""
    with _counting_forwards(tiny_lm.blocks[0]) as calls:  # every pass runs block 0
        for target, message in (
            ("<b>x</b>", "is not in the vocabulary"),
            (10**9, "an id in 0..21"),
            ([1], "got [1]"),
            ("\ud800", "lone surrogate"),  # a 500 (UnicodeEncodeError in the tokenizer)
        ):
            body = {"text": TEXT, "heads": [[0, 0]], "mode": "mean", "target": target}
            r = client.post("/api/ablate", content=json.dumps(body), headers={"content-type": "application/json"})
            assert r.status_code == 422 and message in r.json()["error"], r.text
    assert calls == []


def test_malformed_json_wrong_type_and_huge_bodies(client):
    def post(content, ctype="application/json"):
        return client.post("/api/run", content=content, headers={"content-type": ctype})

    for bad in (b"{bad", b"\xff\xfe", b'{"text": "cat"'):
        r = post(bad)
        assert r.status_code == 400 and "malformed JSON" in r.json()["error"]
    r = post(b'["cat"]')
    assert r.status_code == 400 and "JSON object" in r.json()["error"]
    r = post(b'{"text": "cat"}', "text/plain")  # what a cross-site form can send without a preflight
    assert r.status_code == 415
    r = post(json.dumps({"text": "cat " * MAX_BODY}).encode())
    assert r.status_code == 413 and "larger than" in r.json()["error"]


def test_deeply_nested_json_is_400(client):
    """json's decoder recurses per level: 100,000 levels were a RecursionError and a 500."""
    r = client.post("/api/run", content=b"[" * 100_000 + b"]" * 100_000, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "nested too deeply" in r.json()["error"]


def test_typed_control_tokens_are_noted(client):
    """A typed [PAD] is read as the control token, not as characters: every answer says so."""
    text = "the cat [PAD] sleeps ."
    r = client.post("/api/run", json={"text": text}).json()
    assert "[PAD]" in r["tokens"] and len(r["notes"]) == 1, r
    assert "'[PAD]' in the text is read as the tokenizer's control token" in r["notes"][0]
    head = client.post("/api/head", json={"text": text, "layer": 0, "head": 0}).json()
    ablation = client.post("/api/ablate", json={"text": text, "heads": [[0, 0]]}).json()
    assert head["notes"] == ablation["notes"] == r["notes"]
    assert client.post("/api/run", json={"text": TEXT}).json()["notes"] == []


def test_head_pattern_answers_are_bounded():
    """--max-tokens up to n_ctx made /api/head's token x token answer grow with the square of the
    length; the head view takes at most 512 tokens, the run, layer view and ablation the whole budget."""
    from starlette.testclient import TestClient

    cap = 512  # analyses.explore.limits.PATTERN_MAX_TOKENS
    m = randomized(tiny_config(d_vocab=len(VOCAB), n_ctx=cap + 16, name="tiny"), seed=1)
    m.tokenizer = word_tokenizer()
    app = create_app(Session(m.eval(), max_tokens=cap + 16), allowed_hosts("127.0.0.1", 8765))
    long = " ".join(["cat"] * (cap + 8))
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        assert c.get("/api/info").json()["pattern_max_tokens"] == cap
        assert c.post("/api/run", json={"text": long}).status_code == 200
        r = c.post("/api/head", json={"text": long, "layer": 0, "head": 0})
        assert r.status_code == 413 and f"{cap + 8} tokens; the head view's" in r.json()["error"]
        assert f"at most {cap}" in r.json()["error"]
        assert c.post("/api/layer", json={"text": long, "layer": 0, "query": cap}).status_code == 200
        short = " ".join(["cat"] * cap)
        assert len(c.post("/api/head", json={"text": short, "layer": 0, "head": 0}).json()["pattern"]) == cap


def test_target_is_refused_on_an_encoder(minilm):
    """MiniLM has no logits: a target was ignored without a word."""
    from starlette.testclient import TestClient

    app = create_app(Session(minilm), allowed_hosts("127.0.0.1", 8765))
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        body = {"text": "The keys to the cabinet are here.", "heads": [[0, 0]]}
        assert c.post("/api/ablate", json=body).status_code == 200
        r = c.post("/api/ablate", json={**body, "target": "keys"})
        assert r.status_code == 422 and "has no LM head" in r.json()["error"], r.json()
        assert "leave target out" in r.json()["error"]


def test_target_as_shown_raw_or_with_its_space(smollm2):
    """`_were` (as the page shows it), ` were` (its text, space kept) and `Ġwere` (the vocabulary's)
    are one token, and the answer names it; `were` is another token, and says so."""
    from starlette.testclient import TestClient

    were = smollm2.tokenizer.hf.convert_tokens_to_ids("Ġwere")
    app = create_app(Session(smollm2), allowed_hosts("127.0.0.1", 8765))
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        assert c.get("/api/info").json()["input"] == "prepend <|endoftext|>"  # the probe's input convention

        def ablate(target):
            return c.post("/api/ablate", json={"text": "The keys to the cabinet", "heads": [[5, 3]], "target": target})

        answers = [ablate(t).json() for t in ("_were", " were", "Ġwere")]
        for a, typed in zip(answers, ("_were", " were", "Ġwere")):
            assert (a["target_id"], a["target_token"], a["target_label"], a["target_typed"]) == (
                were,
                "Ġwere",
                "_were",
                typed,
            ), a
        assert answers[0]["logit_change"] == answers[1]["logit_change"] == answers[2]["logit_change"]
        bare = ablate("were").json()
        assert bare["target_id"] != were and (bare["target_token"], bare["target_label"]) == ("were", "were")
        r = ablate(" were here")
        assert r.status_code == 422 and "not in the vocabulary" in r.json()["error"]


def test_the_docs_python_example_imports():
    """docs/explore.md's "From Python" imports ran into an ImportError (`from analyses.explore import
    Session`: the package re-exports only the torch-free limits)."""
    doc = (Path(__file__).parents[3] / "docs" / "explore.md").read_text(encoding="utf-8")
    example = doc.split("## From Python", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    imports = [line for line in example.splitlines() if line.startswith(("import ", "from "))]
    assert any("Session" in line for line in imports), imports
    namespace: dict = {}
    exec("\n".join(imports), namespace)
    assert namespace["Session"] is Session


def test_host_header_is_checked(client):
    for host in ("evil.example:8765", "evil.example", "127.0.0.1:9999", "localhost"):
        r = client.get("/api/info", headers={"host": host})
        assert r.status_code == 400 and "does not name this server" in r.json()["error"], host
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        assert client.get("/api/info", headers={"host": host}).status_code == 200, host
    assert allowed_hosts("10.1.2.3", 80) >= {"10.1.2.3", "10.1.2.3:80", "localhost:80"}


def test_no_route_takes_a_path_and_the_page_runs_only_its_own_script(client):
    inner = client.app.app
    assert all("{" not in r.path for r in inner.routes)
    for path in ("/../../etc/passwd", "/assets/explore.js", "/templates/explore.html"):
        assert client.get(path).status_code == 404
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    nonce = csp.split("'nonce-")[1].split("'")[0]
    assert "default-src 'none'" in csp and r.text.count(f'nonce="{nonce}"') == 1
    assert r.text.count("<script") == 2  # the data block (type=application/json) and the page's script


# -- a real server: parallel requests, stopping ---------------------------------------------------------


def _free_port_is_closed(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


@contextmanager
def _serving(session: Session, servers: list | None = None):
    """uvicorn in a thread on a free port; stopped on exit, and nothing may listen there afterwards.
    ``servers``, when given, gets the uvicorn server (to watch its connections)."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(session, allowed_hosts("127.0.0.1", port)), log_level="warning", lifespan="off")
    )
    if servers is not None:
        servers.append(server)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()
        assert not thread.is_alive()
        assert _free_port_is_closed(port)


def test_parallel_requests_get_the_sequential_answers(tiny_lm):
    import httpx

    texts = ["the cat sleeps .", TEXT, "the dog of the big tree barks .", "the fox runs ."]
    jobs = [("head", {"text": t, "layer": i % 2, "head": i % 4}) for i, t in enumerate(texts * 2)]
    jobs += [("ablate", {"text": t, "heads": [[1, i % 4]], "mode": "mean"}) for i, t in enumerate(texts)]
    with _serving(Session(tiny_lm)) as url, httpx.Client(base_url=url, timeout=60) as http:
        sequential = [http.post(f"/api/{route}", json=body).json() for route, body in jobs]
        with ThreadPoolExecutor(8) as pool:
            parallel = list(pool.map(lambda job: http.post(f"/api/{job[0]}", json=job[1]).json(), jobs * 2))
    assert parallel == sequential * 2


def _wait(condition, what: str, seconds: float = 30) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _watched(base: type[Session], method: str):
    """A session class that records, per call of ``method`` (in the request's worker thread, before
    the model's lock), its arguments, its request's CLIENT_GONE event, and when it has returned."""
    from analyses.explore import session as session_module

    class Watched(base):
        entered: list = []
        gone: list = []
        left: list = []

    def call(self, *args, **kwargs):
        self.entered.append(kwargs)
        event = getattr(session_module, "CLIENT_GONE", None)
        self.gone.append(event.get() if event is not None else None)
        try:
            return getattr(base, method)(self, *args, **kwargs)
        finally:
            self.left.append(1)

    setattr(Watched, method, call)
    return Watched


def test_requests_abandoned_while_queued_are_skipped(tiny_lm):
    """Issue 41: a request whose client went away still ran (8 abandoned ablations delayed the next
    answer by 28 s). Requests queued behind the model whose clients close their connections are
    skipped: no forward pass of theirs runs once the model is free; a live request is answered."""
    import httpx

    session, servers, n = _watched(Session, "head")(tiny_lm), [], 4
    entered, gone, left, wait = session.entered, session.gone, session.left, _wait
    with _serving(session, servers) as url:
        port = int(url.rsplit(":", 1)[1])
        body = json.dumps({"text": TEXT, "layer": 1, "head": 2}).encode()
        request = (
            f"POST /api/head HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with _counting_forwards(tiny_lm.blocks[0]) as calls:  # every pass runs block 0
            with session._lock:  # the model is busy: the requests queue behind it
                clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
                for c in clients:
                    c.sendall(request)
                wait(lambda: len(entered) == n, "the requests to reach the session")
                for c in clients:  # the clients give up
                    c.close()
                wait(lambda: not servers[0].server_state.connections, "the server to see the clients go")
                wait(lambda: all(g is None or g.is_set() for g in gone), "the requests to be marked abandoned")
            wait(lambda: len(left) == n, "the queued requests to finish")
            assert calls == [], f"{len(calls)} forward passes ran for clients that had gone away"
            assert session.skipped == n
            with httpx.Client(base_url=url, timeout=60) as http:
                r = http.post("/api/head", json={"text": TEXT, "layer": 1, "head": 2})
            assert r.status_code == 200 and len(calls) == 1


def test_a_shutdown_skips_the_requests_still_queued(tiny_lm):
    """Requests queued behind the model, their clients still connected, when the server is told to
    stop: uvicorn's cancellation waits for each worker thread, so the shutdown ran every queued
    forward pass first (8 SmolLM2 ablations: 28 s, not GRACE). The command's server stops the session
    first: the queued requests are skipped."""
    import uvicorn

    from analyses.cli.explore import _server

    session, n = _watched(Session, "head")(tiny_lm), 4
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(session, allowed_hosts("127.0.0.1", port)),
        log_level="critical",
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = _server(config, session)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    body = json.dumps({"text": TEXT, "layer": 1, "head": 2}).encode()
    request = (
        f"POST /api/head HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    clients = []
    try:
        with _counting_forwards(tiny_lm.blocks[0]) as calls:
            with session._lock:  # the model is busy: the requests queue behind it
                thread.start()
                _wait(lambda: server.started, "the server to start")
                clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
                for c in clients:
                    c.sendall(request)
                _wait(lambda: len(session.entered) == n, "the requests to reach the session")
                server.should_exit = True  # as a Ctrl-C does
                _wait(lambda: _free_port_is_closed(port), "the shutdown to begin")
            thread.join(20)
            assert not thread.is_alive(), "the server did not stop"
            assert calls == [], f"{len(calls)} queued forward passes ran during the shutdown"
            assert session.skipped == n
    finally:
        for c in clients:
            c.close()
        sock.close()


# -- the page in a browser -------------------------------------------------------------------------------


def _shots(tmp_path: Path) -> Path:
    d = Path(os.environ.get("INTERP_TEST_ARTIFACTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _open(browser, url: str):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    return ctx, page, errors


def _type_and_run(page, text: str) -> None:
    ran = page.get_attribute("body", "data-ran") or "0"
    page.fill("#text", text)
    page.click("#run")
    page.wait_for_selector(f"body[data-ran='{int(ran) + 1}']")


def _click_head(page, layer: int, head: int) -> None:
    page.click(f"#grid button[data-layer='{layer}'][data-head='{head}']")
    page.wait_for_selector(f"#pattern[data-layer='{layer}'][data-head='{head}']")


def _shown(page, lens: str = "pattern") -> torch.Tensor:
    """The pattern table's values, read from the page (data-v: the exact float the server sent)."""
    page.wait_for_selector(f"#pattern[data-lens='{lens}'][data-level='tokens']")
    rows = page.eval_on_selector_all(
        "#pattern tbody tr", "trs => trs.map(tr => [...tr.querySelectorAll('td')].map(td => td.dataset.v))"
    )
    return torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float32)


def _ablate(page, heads, mode: str = "zero") -> float:
    for layer, head in heads:
        page.click(f"#grid button[data-layer='{layer}'][data-head='{head}']", modifiers=["Shift"])
    page.select_option("#mode", mode)
    done = page.get_attribute("#ablation-result", "data-done") or "0"
    page.click("#ablate")
    page.wait_for_selector(f"#ablation-result[data-done='{int(done) + 1}']")
    return float(page.get_attribute("#logit-change", "data-v"))


@contextmanager
def _explore(tmp_path: Path, *flags: str, ignore_sigint: bool = False):
    """``interp explore`` on the tiny folder model in a subprocess: yields (proc, url, port). The
    caller stops it; on the way out it is killed if it still runs."""
    folder = tmp_path / "tiny"
    if not folder.exists():
        models.save_checkpoint(_tiny_lm(), folder)
    cmd = [sys.executable, "-c", "import sys; from analyses.cli import main; sys.exit(main())", "explore"]
    proc = subprocess.Popen(
        [*cmd, "--model", str(folder), "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a SIGINT inherited as ignored, as a background job of a shell or some CI runners start it
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("interp explore: tiny at http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.split(" at ")[1].split()[0]
        yield proc, url, int(url.rsplit(":", 1)[1].strip("/"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _stopped(proc, seconds: float = 30) -> str:
    """Wait for the process to end; its stderr. It must exit 0 having said it stopped, no traceback."""
    try:
        _, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"still running {seconds} s after the signal: {proc.communicate()[1]}") from None
    assert proc.returncode == 0 and "interp explore: stopped" in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("where", ["analyses.cli:build_parser", "analyses.cli.explore:_bind"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_right_after_start_says_stopped(tmp_path, where, sig):
    """Issue 41: a Ctrl-C right after start, before the server is ready, came before the command's
    handler was installed: a KeyboardInterrupt traceback (while the command line loaded its commands)
    or `interrupted`, exit 130 (while binding the port), and CI failed on the timing. Here the signal
    comes at a fixed point of that window: the process sends it to itself there."""
    module, name = where.split(":")
    code = (
        "import importlib, os, sys\n"
        f"m = importlib.import_module({module!r})\n"
        f"original = m.{name}\n"
        "def early(*a, **k):\n"
        f"    os.kill(os.getpid(), {int(sig)})\n"
        "    return original(*a, **k)\n"
        f"m.{name} = early\n"
        "from analyses.cli import main\n"
        "sys.exit(main())\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "explore", "--model", str(tmp_path / "never-loaded"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, "", "interp explore: stopped\n")  # it never served, no traceback


def test_ctrl_c_says_stopped_though_sigint_was_inherited_as_ignored(tmp_path):
    """uvicorn put the inherited handler (ignored) back and re-raised the signal into it: the server
    stopped without a word. The command's own handler records it."""
    with _explore(tmp_path, ignore_sigint=True) as (proc, url, port):
        proc.send_signal(signal.SIGINT)
        _stopped(proc)
    assert _free_port_is_closed(port)


def _stall_mid_body(port: int) -> socket.socket:
    """A client that sends a request's headers and half its body, then nothing."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(
        f"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        'Content-Length: 100\r\n\r\n{"text": '.encode()
    )
    time.sleep(0.5)  # the server has read the headers and waits for the rest
    return s


def test_ctrl_c_while_a_client_stalls_mid_body(tmp_path):
    """One Ctrl-C: the server waits for the stalled request at most GRACE seconds; a second Ctrl-C
    stops at once; neither prints a traceback."""
    from analyses.cli.explore import GRACE

    for presses in (1, 2):
        with _explore(tmp_path) as (proc, url, port):
            stalled = _stall_mid_body(port)
            try:
                start = time.monotonic()
                proc.send_signal(signal.SIGINT)
                if presses == 2:
                    time.sleep(0.5)
                    proc.send_signal(signal.SIGINT)
                _stopped(proc, seconds=GRACE + 20)
                assert presses == 1 or time.monotonic() - start < GRACE, "the second Ctrl-C did not stop at once"
            finally:
                stalled.close()
        assert _free_port_is_closed(port)


def test_interp_explore_in_the_browser_and_ctrl_c(browser, tmp_path):
    """`interp explore` on a folder model, driven through Chromium: the pattern and norm lens the page
    shows are the model's own, the ablation's logit change is run_ablated's; bad input gets a
    message in the page; Ctrl-C stops the server and nothing listens on its port afterwards."""
    model = models.load(models.save_checkpoint(_tiny_lm(), tmp_path / "tiny"))
    _heads_table().to_csv(tmp_path / "heads.csv", index=False)
    with _explore(tmp_path, "--heads", str(tmp_path / "heads.csv")) as (proc, url, port):
        ctx, page, errors = _open(browser, url)
        _type_and_run(page, TEXT)
        _click_head(page, 1, 2)
        assert "previous_token" in page.get_attribute("#grid button[data-layer='1'][data-head='2']", "title")
        assert "Primary role: previous_token" in page.text_content("#roles")
        legend = page.eval_on_selector_all("#legend span", "ss => ss.map(s => s.textContent)")
        assert legend == ["previous_token", "idle (sink)", "unclassified"], legend  # every colour the grid uses
        idle = page.eval_on_selector("#grid button[data-layer='0'][data-head='3']", "b => b.style.background")
        assert idle == page.eval_on_selector("#legend span:nth-child(2) i", "i => i.style.background")
        cache = _cached(model, TEXT)
        assert torch.equal(_shown(page), cache["blocks.1.attn.hook_pattern"][0, 2])
        page.check("#lens-norm")
        assert torch.equal(_shown(page, "norm"), _norm_lens(model, cache, 1)[2])
        assert _ablate(page, [(1, 2), (0, 1)]) == _expected_change(model, TEXT, [(0, 1), (1, 2)], "zero")[1]
        page.fill("#text", "")
        page.click("#run")
        assert "empty" in page.text_content("#message")
        _type_and_run(page, TEXT)
        page.fill("#text", " ".join(["cat"] * 17))
        page.click("#run")
        page.wait_for_selector("#message.error >> text=more than 16")
        page.fill("#target", "<img src=x onerror=alert(1)>")
        page.click("#ablate")
        page.wait_for_selector("#message.error >> text=is not in the vocabulary")
        assert "<img src=x onerror=alert(1)>" in page.text_content("#message")
        assert page.query_selector("#message img") is None
        page.screenshot(path=str(_shots(tmp_path) / "explore_tiny.png"), full_page=True)
        ctx.close()
        assert errors == [] or all("status of 4" in e for e in errors), errors  # only the 4xx answers asked for
        proc.send_signal(signal.SIGINT)
        _stopped(proc)
    assert _free_port_is_closed(port)


def test_smollm2_page_hostile_text_and_ablation(browser, smollm2, tmp_path):
    """SmolLM2 in the page: a typed `</script><!--<script>` shows as those characters, the pattern of
    a clicked head is the model's own hook_pattern, and the mean ablation is run_ablated's."""
    hostile = "The keys to the cabinet are </script><!--<script> on the table"
    # expectations first: the page's requests use the same model object from the server's thread
    cache = _cached(smollm2, hostile)
    expected = _expected_change(smollm2, hostile, [(5, 3), (9, 1)], "mean")[1]
    were = smollm2.tokenizer.hf.convert_tokens_to_ids("Ġwere")
    expected_were = _expected_change(smollm2, hostile, [(5, 3), (9, 1)], "mean", target=were)[1]
    b = _words(smollm2, hostile)
    assert b.tokens[0][0] == "<|endoftext|>"  # the probe's input convention (labels v4)
    with _serving(Session(smollm2)) as url:
        ctx, page, errors = _open(browser, url)
        _type_and_run(page, hostile)
        shown = page.eval_on_selector_all("#tokens span", "ss => ss.map(s => s.textContent)")
        assert shown == [token_label(t) for t in b.tokens[0]] and "</script><!--<script>" in "".join(shown)
        assert page.text_content("#ran q") == hostile and page.query_selector("#ran q *") is None
        assert page.eval_on_selector_all("script", "ss => ss.length") == 2
        _click_head(page, 5, 3)
        assert torch.equal(_shown(page), cache["blocks.5.attn.hook_pattern"][0, 3])
        page.check("#level-words")  # byte-level BPE merges "></" across words: one row per token-owning word
        page.wait_for_selector("#pattern[data-level='words']")
        labels = page.eval_on_selector_all("#pattern tbody th", "ths => ths.map(t => t.textContent)")
        assert labels[0] == "The" and any("</" in w for w in labels) and len(labels) < len(b.words[0])
        page.check("#level-tokens")
        page.click("#pattern tbody th >> nth=4")  # the layer view from query token 4
        page.wait_for_selector("#layerview[data-layer='5'][data-query='4']")
        change = _ablate(page, [(5, 3), (9, 1)], mode="mean")
        assert change == expected
        assert "EXAMPLE_SENTENCES" in page.text_content("#ablation-result")
        page.fill("#target", " were")  # typed with its space: never trimmed to `were`, another token
        done = page.get_attribute("#ablation-result", "data-done")
        page.click("#ablate")
        page.wait_for_selector(f"#ablation-result[data-done='{int(done) + 1}']")
        assert float(page.get_attribute("#logit-change", "data-v")) == expected_were
        line = page.text_content("#target-line")
        assert line.startswith(f"Logit of _were (token Ġwere, id {were}; you typed \u201c were\u201d)"), line
        page.screenshot(path=str(_shots(tmp_path) / "explore_smollm2.png"), full_page=True)
        ctx.close()
    assert errors == []


def test_an_ablation_in_flight_is_not_drawn_against_a_newer_text(browser, tiny_lm):
    """An ablation still running when a new text is run belongs to the old text: its answer is
    dropped, not drawn over the new text's tokens."""
    gate = threading.Event()

    class Slow(Session):
        def ablate(self, *args, **kwargs):
            gate.wait(30)
            return super().ablate(*args, **kwargs)

    with _serving(Slow(tiny_lm)) as url:
        ctx, page, errors = _open(browser, url)
        _type_and_run(page, TEXT)
        page.click("#grid button[data-layer='1'][data-head='2']", modifiers=["Shift"])
        page.click("#ablate")  # waits at the gate
        _type_and_run(page, "the dog barks .")
        with page.expect_response("**/api/ablate"):
            gate.set()
        page.wait_for_selector("body:not(.busy)")
        assert page.text_content("#ablation-result") == ""
        done = page.get_attribute("#ablation-result", "data-done") or "0"
        page.click("#ablate")  # the new text's own ablation is drawn, over its own tokens
        page.wait_for_selector(f"#ablation-result[data-done='{int(done) + 1}']")
        assert "(.)" in page.text_content("#ablation-result")
        ctx.close()
    assert errors == []


def test_the_page_aborts_a_superseded_request_and_the_server_skips_it(browser, tiny_lm):
    """Heads clicked while the model is busy: each click's request replaces the previous one, which
    the page aborts (its connection closes), so the server skips its work; the last head is drawn."""
    session = _watched(Session, "head")(tiny_lm)
    with _serving(session) as url:
        ctx, page, errors = _open(browser, url)
        _type_and_run(page, TEXT)
        page.wait_for_selector("body:not(.busy)")
        first = len(session.entered)
        heads = [(1, 0), (1, 1), (0, 2), (1, 3)]
        with session._lock:  # the model is busy: the clicks' requests queue behind it
            for i, (layer, head) in enumerate(heads):
                page.click(f"#grid button[data-layer='{layer}'][data-head='{head}']")
                _wait(lambda: len(session.entered) == first + i + 1, f"the request for L{layer}H{head}")
            _wait(lambda: all(g is not None and g.is_set() for g in session.gone[first:-1]), "the aborts", 10)
        page.wait_for_selector("#pattern[data-layer='1'][data-head='3']")
        _wait(lambda: len(session.left) == len(session.entered), "the requests to finish")
        assert [(d["layer"], d["head"]) for d in session.entered[first:]] == heads
        assert session.skipped == len(heads) - 1
        assert not session.gone[-1].is_set()
        ctx.close()
    assert errors == []


def test_a_word_without_a_token_joins_the_word_before():
    from analyses.explore.session import _word_groups

    assert _word_groups([-1, 0, 1, 3, -1], ["a", "b", "c", "d"]) == ([-1, 0, 1, 2, -1], ["a", "bc", "d"])
    assert _word_groups([1, 1], ["x", "y"]) == ([0, 0], ["xy"])


def test_cli_bad_flags_are_one_line_errors_before_the_model_loads(capsys):
    from analyses.cli import main

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        assert main(["explore", "--model", "no-such-model", "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"interp explore: cannot listen on 127.0.0.1:{port}") and err.count("\n") == 1
        assert main(["explore", "--model", "no-such-model", "--host", "0.0.0.0", "--port", str(port)]) == 2
        assert "warning: --host 0.0.0.0 is not loopback" in capsys.readouterr().err
    finally:
        taken.close()
    assert main(["explore", "--max-tokens", "0"]) == 2
    assert capsys.readouterr().err == "interp explore: --max-tokens must be a positive integer, got 0\n"
    assert main(["explore", "--port", "70000"]) == 2
    assert "--port must be in 0..65535" in capsys.readouterr().err


def test_role_map_names_the_reading_and_the_real_text():
    """Issue 35: the explorer's role map names a relation's reading (primary, secondary and evidence)
    and carries each label's real-text support; an old heads.csv reads as retrospective."""
    from analyses.explore.session import _colours, _head_roles
    from tests.analyses.heads.planted_tables import planted_heads

    roles = _head_roles(planted_heads(), 2, 3)
    both = roles["1.1"]
    assert both["primary"] == "subject_verb (retrospective)" and both["secondary"] == ["subject_verb (predictive)"]
    ev = {e["direction"]: e for e in both["evidence"]}
    assert ev["pre-verb->subject"]["role"] == "subject_verb (predictive)"
    assert ev["pre-verb->subject"]["reading"] == "predictive"
    assert ev["verb->subject"]["real_text"] == "supported (spacy-silver)"
    assert roles["0.0"]["evidence"][0]["real_text"] == "templates only"
    assert (roles["0.1"]["primary"], roles["0.2"]["primary"]) == ("sink writer", "no-op sink")
    assert {"sink writer", "no-op sink", "subject_verb (predictive)"} <= set(_colours())
    old = _head_roles(planted_heads(old=True), 2, 3)
    assert old["1.1"]["primary"] == "subject_verb (retrospective)" and old["1.1"]["evidence"][0]["real_text"] == "-"
