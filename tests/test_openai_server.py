"""`dflash-trt serve --api openai` against the official `openai` client, on loopback.

One real server process for the module, started as users start it (a subprocess of `python -m dflash_trt serve
--api openai`) and stopped with SIGINT; greedy and seeded outputs compared with the engine's own `generate` on the
same fixture pair (lossless: identical tokens); errors, stop strings, n, usage, disconnects and /metrics. The stop
string / streamed-text rules are unit-tested without a server (text.py), and the app in-process (starlette's
TestClient) for what needs another engine (a tokenizer without a chat template, a custom model name).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

import torch  # noqa: E402

from dflash_trt import SamplingParams  # noqa: E402
from dflash_trt.engines.torch_engine import TorchEngine  # noqa: E402
from dflash_trt.serve.openai.text import TextStream, find_stop, holdback, visible_text  # noqa: E402
from dflash_trt.serve.triton.server import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "tests" / "fixtures" / "gsm8k-tiny"
MAX_BATCH, MAX_SEQ = 16, 512
MODEL = "target"  # the target directory's name
QUESTIONS = [json.loads(line)["turns"][0] for line in (ROOT / "data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()[:40]]


# ---- stop strings and streamed text (no server) ---------------------------------------------------------------------


def test_find_stop_and_holdback():
    assert find_stop("abc\n\ndef", ["\n\n", "de"]) == 3
    assert find_stop("abcdef", ["xy", "cd", "b"]) == 1  # the earliest occurrence of any stop
    assert find_stop("abc", []) is None and find_stop("abc", ["x"]) is None
    assert holdback("the answer is ##", ["####"]) == 2  # "##" may become "####"
    assert holdback("the answer is #", ["####", "is #x"]) == 4  # the longest suffix that starts a stop
    assert holdback("abc", ["xyz"]) == 0 and holdback("", ["ab"]) == 0
    assert holdback("ab", ["ab"]) == 0  # a whole stop is found, not held back


def test_visible_text():
    assert visible_text("x = 6\n#### 6", ["####"], False) == ("x = 6\n", True)
    assert visible_text("x = 6\n##", ["####"], False) == ("x = 6\n", False)  # held back
    assert visible_text("x = 6\n##", ["####"], True) == ("x = 6\n##", False)  # finished: everything
    assert visible_text("caf\ufffd", [], False) == ("caf", False)  # an incomplete character waits
    assert visible_text("caf\ufffd", [], True) == ("caf\ufffd", False)


def test_text_stream_never_sends_past_a_stop_string():
    stops = ["STOP", "\n\n"]
    full = "one two ST three\nfour\n\nfive"
    want = full[: find_stop(full, stops)]
    for step in (1, 2, 3, 5):  # the text arriving in pieces of every size
        stream, sent, stopped = TextStream(stops), "", False
        for end in range(step, len(full) + step, step):
            delta, stopped = stream.update(full[:end], end >= len(full))
            sent += delta
            assert want.startswith(sent)  # never anything past (or instead of) the text before the stop
            if stopped:
                break
        assert stopped and sent == want
    stream = TextStream(["</s>"])
    assert stream.update("abc <", False) == ("abc ", False)
    assert stream.update("abc <b", False) == ("<b", False)  # "<b" cannot start "</s>": released
    assert stream.update("abc <b </", False) == (" ", False)
    assert stream.update("abc <b </s> more", False) == ("", True)


# ---- the server ----------------------------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("openai") / "server.log"
    port = free_port()
    cmd = [sys.executable, "-m", "dflash_trt", "serve", "--api", "openai", "--target", str(PAIR / "target"),
           "--drafter", str(PAIR / "drafter"), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
           "--torch-threads", "1", "--max-batch-size", str(MAX_BATCH), "--max-seq-len", str(MAX_SEQ)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the server did not become healthy:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    yield {"url": url, "proc": proc, "log": log}
    if proc.poll() is None:
        _stop(proc)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["url"] + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def engine():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=MAX_BATCH,
                                      max_seq_len=MAX_SEQ)
    torch.set_num_threads(threads)


def _chat_prompt(engine, question: str) -> str:
    return engine.tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                                add_generation_prompt=True)


def _greedy(engine, prompt: str, max_tokens: int, **kw):
    return engine.generate([prompt], SamplingParams(max_new_tokens=max_tokens, temperature=0.0, **kw))[0]


def _health(server) -> dict:
    r = httpx.get(server["url"] + "/health", timeout=5)
    assert r.status_code == 200, r.text
    return r.json()


def _metrics(server) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(httpx.get(server["url"] + "/metrics", timeout=5).text):
        for s in family.samples:
            key = s.name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}" if s.labels else "")
            out[key] = s.value
    return out


def _wait_idle(server, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        h = _health(server)
        if h["running"] == 0 and h["waiting"] == 0:
            return h
        if time.monotonic() > deadline:
            raise AssertionError(f"requests still running: {h}")
        time.sleep(0.05)


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == [MODEL]
    h = _health(server)
    assert h["status"] == "ok" and h["model"] == MODEL and h["verify_len"] == 16 and h["speculative"] is True


def test_completion_greedy_equals_engine_stream_and_not(client, engine):
    prompt = _chat_prompt(engine, QUESTIONS[0])
    want = _greedy(engine, prompt, 40)
    got = client.completions.create(model=MODEL, prompt=prompt, max_tokens=40, temperature=0)
    choice = got.choices[0]
    assert choice.text == want.text and choice.finish_reason == want.finish_reason
    n_prompt = len(engine.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (n_prompt, len(want.token_ids))
    assert got.usage.total_tokens == n_prompt + len(want.token_ids)
    dflash = got.usage.model_extra["dflash"]
    assert dflash["verify_len"] == 16 and dflash["steps"] == want.stats.steps
    assert dflash["mean_acceptance_length"] == pytest.approx(want.stats.mean_tau)
    assert got.object == "text_completion" and got.model == MODEL and got.id.startswith("cmpl-")

    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=40, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == want.text
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [want.finish_reason]
    assert chunks[-1].usage.completion_tokens == len(want.token_ids) and not chunks[-1].choices
    assert len([c for c in chunks if c.choices and c.choices[0].text]) > 1  # streamed in pieces


def test_chat_greedy_equals_engine_stream_and_not(client, engine):
    want = _greedy(engine, _chat_prompt(engine, QUESTIONS[1]), 48)
    messages = [{"role": "user", "content": QUESTIONS[1]}]
    got = client.chat.completions.create(model=MODEL, messages=messages, max_completion_tokens=48, temperature=0)
    assert got.choices[0].message.content == want.text and got.choices[0].message.role == "assistant"
    assert got.choices[0].finish_reason == want.finish_reason and got.object == "chat.completion"
    assert got.usage.completion_tokens == len(want.token_ids)
    assert got.usage.prompt_tokens == len(want.prompt_token_ids)
    stream = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=48, temperature=0, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == want.text
    assert chunks[-1].choices[0].finish_reason == want.finish_reason
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_32_concurrent_streams_equal_sequential_outputs(server, engine):
    prompts = [_chat_prompt(engine, q) for q in QUESTIONS[:32]]
    want = [_greedy(engine, p, 16).text for p in prompts]  # one at a time

    async def one(aclient, prompt):
        stream = await aclient.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=0,
                                                  stream=True)
        return "".join([c.choices[0].text async for c in stream])

    async def main():
        aclient = openai.AsyncOpenAI(base_url=server["url"] + "/v1", api_key="unused", max_retries=0, timeout=120)
        try:
            return await asyncio.gather(*(one(aclient, p) for p in prompts))
        finally:
            await aclient.close()

    got = asyncio.run(main())
    assert got == want
    _wait_idle(server)


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


def test_bad_requests_get_openai_errors_and_the_server_stays_up(server, client):
    url = server["url"]
    before = _metrics(server)["dflash_requests_rejected_total"]
    ok = {"model": MODEL, "prompt": "Question: 1 + 1?\nAnswer:", "max_tokens": 4}
    cases = [  # (body, status, param, words in the message)
        ({k: v for k, v in ok.items() if k != "model"}, 400, "model", "Field required"),
        ({**ok, "model": "gpt-4"}, 404, "model", "does not exist"),
        ({**ok, "max_tokens": -1}, 400, "max_tokens", "max_tokens must be an integer >= 1"),
        ({**ok, "max_tokens": 2.5}, 400, "max_tokens", "valid integer"),
        ({**ok, "temperature": -1}, 400, "temperature", "temperature must be a finite number >= 0"),
        ({**ok, "temperature": "abc"}, 400, "temperature", "valid number"),
        ({**ok, "top_p": 0}, 400, "top_p", "top_p must be in (0, 1]"),
        ({**ok, "n": 0}, 400, "n", "n must be"),
        ({**ok, "stop": [""]}, 400, "stop", "empty stop string"),
        ({**ok, "logprobs": 3}, 400, "logprobs", "not supported"),
        ({**ok, "prompt": [1, 99999]}, 400, "prompt", "outside the vocabulary"),
        ({**ok, "prompt": "word " * 40_000}, 400, "prompt", f"exceeds max_seq_len {MAX_SEQ}"),  # 200k characters
        ({**ok, "max_tokens": MAX_SEQ}, 400, "prompt", f"max_tokens {MAX_SEQ} exceeds max_seq_len {MAX_SEQ}"),
    ]
    for body, status, param, words in cases:
        error = _error(httpx.post(f"{url}/v1/completions", json=body, timeout=30), status)
        assert error["param"] == param and words in error["message"], (body.get("prompt", "")[:20], error)
        assert error["type"] == "invalid_request_error"
    assert _error(httpx.post(f"{url}/v1/completions", json={**ok, "model": "gpt-4"}), 404)["code"] == "model_not_found"
    # malformed JSON, a JSON body that is not an object, no body
    for raw in (b'{"model": "target", "prompt": ', b"[1, 2]", b""):
        error = _error(httpx.post(f"{url}/v1/completions", content=raw, headers={"content-type": "application/json"}),
                       400)
        assert error["type"] == "invalid_request_error"
    assert "malformed JSON" in _error(httpx.post(f"{url}/v1/chat/completions", content=b"{nope",
                                                 headers={"content-type": "application/json"}), 400)["message"]
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    assert _error(httpx.post(f"{url}/v1/chat/completions", json={**chat, "messages": []}), 400)["param"] == "messages"
    error = _error(httpx.post(f"{url}/v1/chat/completions", json={**chat, "messages": [{"role": "tool", "content": "x"}]}),
                   400)
    assert "unsupported role" in error["message"]  # the fixture template's raise_exception
    error = _error(httpx.post(f"{url}/v1/chat/completions", json={**chat, "max_completion_tokens": 0}), 400)
    assert error["param"] == "max_completion_tokens"
    assert _error(httpx.get(f"{url}/v1/nothing"), 404)["code"] == "not_found"
    # the official client raises its typed errors
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.completions.create(model=MODEL, prompt="x", max_tokens=2, temperature=-1)
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.chat.completions.create(model=MODEL, messages=chat["messages"], max_tokens=-5)
    # still serving, nothing left running, every refusal counted
    assert _wait_idle(server)["status"] == "ok"
    assert client.completions.create(model=MODEL, prompt="Question: 2 + 2?\nAnswer:", max_tokens=4,
                                     temperature=0).choices[0].text
    assert _metrics(server)["dflash_requests_rejected_total"] - before >= len(cases) + 10


def test_unknown_fields_are_ignored(server, client, engine):
    prompt = _chat_prompt(engine, QUESTIONS[2])
    got = client.completions.create(model=MODEL, prompt=prompt, max_tokens=8, temperature=0,
                                    extra_body={"some_future_field": 1})
    assert got.choices[0].text == _greedy(engine, prompt, 8).text
    deadline = time.monotonic() + 5
    while "some_future_field" not in server["log"].read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ignoring unknown request field(s): some_future_field" in server["log"].read_text()  # logged, not refused


def test_stop_strings_cut_the_text(server, client, engine):
    prompt = _chat_prompt(engine, QUESTIONS[3])
    full = _greedy(engine, prompt, 64, ignore_eos=True).text
    # a stop string in the middle of the text (likely across token boundaries), one at a line end, one never seen
    mid = full[len(full) // 2: len(full) // 2 + 5]
    for stops in ([mid], ["\n", mid], ["no such text"]):
        at = min((full.find(s) for s in stops if s in full), default=None)
        want = full if at is None else full[:at]
        reason = "length" if at is None else "stop"
        kw = dict(model=MODEL, prompt=prompt, max_tokens=64, temperature=0, stop=stops, extra_body={"ignore_eos": True})
        got = client.completions.create(**kw)
        assert (got.choices[0].text, got.choices[0].finish_reason) == (want, reason), stops
        pieces = [c.choices[0].text for c in client.completions.create(**kw, stream=True)]
        assert "".join(pieces) == want, stops
        if at is not None:
            assert got.usage.completion_tokens < 64  # aborted at the stop string, not run to the budget
    got = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": QUESTIONS[3]}],
                                         max_tokens=64, temperature=0, stop=mid, extra_body={"ignore_eos": True})
    assert got.choices[0].message.content == full[: full.find(mid)] and got.choices[0].finish_reason == "stop"
    _wait_idle(server)  # the stopped requests gave their slots back


def test_n_choices_seeds_and_usage(client, engine):
    prompt = _chat_prompt(engine, QUESTIONS[4])
    got = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0.8, seed=7, n=2)
    assert [c.index for c in got.choices] == [0, 1]
    # choice i is the engine's own sample with seed 7 + i (lossless sampling: the same tokens)
    want = [engine.generate([prompt], SamplingParams(max_new_tokens=24, temperature=0.8, seed=7 + i))[0] for i in (0, 1)]
    assert [c.text for c in got.choices] == [w.text for w in want]
    assert [c.finish_reason for c in got.choices] == [w.finish_reason for w in want]
    n_prompt = len(engine.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert got.usage.prompt_tokens == n_prompt  # counted once, as OpenAI does
    assert got.usage.completion_tokens == sum(len(w.token_ids) for w in want)
    assert got.usage.model_extra["dflash"]["steps"] == sum(w.stats.steps for w in want)
    # a batch of prompts, n each: choice index = prompt * n + j; streamed too
    prompts = [_chat_prompt(engine, q) for q in QUESTIONS[5:7]]
    got = client.completions.create(model=MODEL, prompt=prompts, max_tokens=8, temperature=0, n=2)
    want = [_greedy(engine, p, 8).text for p in prompts]
    assert [c.text for c in sorted(got.choices, key=lambda c: c.index)] == [want[0], want[0], want[1], want[1]]
    streamed: dict[int, str] = {}
    for c in client.completions.create(model=MODEL, prompt=prompts, max_tokens=8, temperature=0, n=2, stream=True):
        streamed[c.choices[0].index] = streamed.get(c.choices[0].index, "") + c.choices[0].text
    assert [streamed[i] for i in range(4)] == [want[0], want[0], want[1], want[1]]
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": QUESTIONS[4]}],
                                          max_tokens=6, temperature=0, n=2)
    assert len(chat.choices) == 2 and chat.choices[0].message.content == chat.choices[1].message.content


def test_a_client_that_disconnects_frees_its_slot(server, client, engine):
    aborted = _metrics(server)['dflash_requests_total{finish_reason=abort}']
    prompt = _chat_prompt(engine, QUESTIONS[8])
    budget = MAX_SEQ - len(engine.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    stream = client.completions.create(model=MODEL, prompt=prompt, max_tokens=budget, temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    for _, chunk in zip(range(3), stream):  # it is generating
        assert chunk.choices[0].text is not None
    stream.close()  # the client goes away mid-stream
    _wait_idle(server)
    m = _metrics(server)
    assert m['dflash_requests_total{finish_reason=abort}'] == aborted + 1 and m["dflash_requests_running"] == 0
    # a non-streamed request whose client gives up after 0.1 s: the ~450-token request takes ~0.5 s on a fast CPU (it
    # finished inside a 0.5 s timeout on one, 2026-11-25), the request itself reaches the idle server in milliseconds
    try:
        r = httpx.post(server["url"] + "/v1/completions", timeout=0.1, json={
            "model": MODEL, "prompt": prompt, "max_tokens": budget, "temperature": 0, "ignore_eos": True})
    except httpx.TimeoutException:
        pass
    else:  # what came back instead, so a failure says why
        pytest.fail(f"the server answered before the client gave up: {r.status_code} {r.text[:300]}")
    _wait_idle(server)
    assert _metrics(server)['dflash_requests_total{finish_reason=abort}'] == aborted + 2
    assert server["proc"].poll() is None


def test_metrics_count_tokens_and_acceptance(server, client, engine):
    before = _metrics(server)
    prompt = _chat_prompt(engine, QUESTIONS[9])
    want = _greedy(engine, prompt, 32)
    client.completions.create(model=MODEL, prompt=prompt, max_tokens=32, temperature=0)
    m = _metrics(server)

    def delta(key):
        return m[key] - before.get(key, 0.0)

    assert delta("dflash_generation_tokens_total") == len(want.token_ids)
    assert delta("dflash_prompt_tokens_total") == len(want.prompt_token_ids)
    assert delta("dflash_acceptance_length_count") == want.stats.steps == delta("dflash_spec_steps_total")
    assert delta("dflash_acceptance_length_sum") == sum(want.stats.taus)
    assert delta("dflash_draft_steps_total{draft=chain:16}") == want.stats.steps  # the fixed draft: one label
    assert delta(f'dflash_requests_total{{finish_reason={want.finish_reason}}}') == 1
    # over everything served so far: τ plausible for this pair (bench: 4.1 on GSM8K), acceptance falls with position
    tau = m["dflash_acceptance_length_sum"] / m["dflash_acceptance_length_count"]
    assert 2.0 < tau <= 16
    assert m['dflash_acceptance_length_bucket{le=16.0}'] == m["dflash_acceptance_length_count"]
    rate = [m[f"dflash_accepted_draft_tokens_by_position_total{{position={k}}}"] / m["dflash_spec_steps_total"]
            for k in range(1, 16)]
    assert rate[0] > 0.5 and all(a >= b for a, b in zip(rate, rate[1:]))
    assert m["dflash_verify_len"] == 16 and m["dflash_time_to_first_token_seconds_count"] > 0
    assert m["dflash_cuda_graphs"] == 0 and m["dflash_cuda_graph_first_use_seconds"] == 0  # CPU: no CUDA graphs


def test_sigint_stops_the_server(server):
    assert _stop(server["proc"]) == 0
    assert "dflash-trt serve: stopped" in server["log"].read_text()


# ---- in-process app and CLI checks ----------------------------------------------------------------------------------


def test_app_without_chat_template_and_with_a_served_name(make_pair):
    from starlette.testclient import TestClient

    from dflash_trt.serve.openai.app import make_app

    target, drafter = make_pair()
    engine = TorchEngine.from_pretrained(target, drafter, device="cpu", max_batch_size=2, max_seq_len=128)
    assert not engine.tokenizer.chat_template
    with TestClient(make_app(engine, model_name="tiny/v1", verify_len=4)) as tc:
        assert tc.get("/v1/models").json()["data"][0]["id"] == "tiny/v1"
        assert tc.get("/v1/models/tiny/v1").json()["id"] == "tiny/v1"
        r = tc.post("/v1/chat/completions", json={"model": "tiny/v1", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400 and "no chat template" in r.json()["error"]["message"]
        r = tc.post("/v1/completions", json={"model": "tiny/v1", "prompt": [5, 6, 7], "max_tokens": 6, "temperature": 0})
        body = r.json()
        assert r.status_code == 200 and body["usage"]["prompt_tokens"] == 3 and body["usage"]["dflash"]["verify_len"] == 4
        got_text = body["choices"][0]["text"]
        assert tc.get("/health").json()["verify_len"] == 4
    # the app's scheduler owned the engine's caches while it ran; now generate may take them back
    want = engine.generate([[5, 6, 7]], SamplingParams(max_new_tokens=6, temperature=0.0), verify_len=4)[0]
    assert got_text == want.text


def test_auto_reports_its_steps_by_draft_in_usage_and_metrics():
    """An auto server (in-process): each response's usage says which drafts its steps verified, /metrics counts them
    (what an operator reads to see auto hold AR under load or run trees alone), and the text is AR's."""
    from prometheus_client.parser import text_string_to_metric_families
    from starlette.testclient import TestClient

    from dflash_trt.serve.openai.app import make_app

    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=2,
                                         max_seq_len=MAX_SEQ)
    prompts = [_chat_prompt(engine, q) for q in QUESTIONS[20:22]]
    want = [_greedy(engine, p, 40).text for p in prompts]
    with TestClient(make_app(engine, model_name=MODEL, draft="auto")) as tc:
        steps, drafts = 0, {}
        for prompt, text in zip(prompts, want):
            r = tc.post("/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 40, "temperature": 0})
            body = r.json()
            assert r.status_code == 200 and body["choices"][0]["text"] == text
            d = body["usage"]["dflash"]
            assert sum(d["draft_steps"].values()) == d["steps"] > 0
            steps += d["steps"]
            for k, n in d["draft_steps"].items():
                drafts[k] = drafts.get(k, 0) + n
        counted = {s.labels["draft"]: s.value for f in text_string_to_metric_families(tc.get("/metrics").text)
                   for s in f.samples if s.name == "dflash_draft_steps_total"}
    assert counted == drafts and sum(counted.values()) == steps
    assert any(k != "chain:1" for k in drafts)  # the trained pair drafts at one request


def test_serve_openai_option_errors(capsys):
    from dflash_trt.cli import main

    target, drafter = str(PAIR / "target"), str(PAIR / "drafter")
    assert main(["serve", "--api", "openai", "--target", target, "--drafter", drafter, "--grpc-port", "9001"]) == 2
    assert "--grpc-port is a Triton option" in capsys.readouterr().err
    assert main(["serve", "--target", target, "--drafter", drafter, "--served-model-name", "x"]) == 2
    assert "--served-model-name is for --api openai" in capsys.readouterr().err
    assert main(["serve", "--api", "openai", "--target", target]) == 2
    assert "--drafter is required" in capsys.readouterr().err
    assert main(["serve", "--api", "openai", "--target", target, "--drafter", drafter, "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
