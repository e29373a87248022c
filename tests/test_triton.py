"""The Triton backend against a real tritonserver on loopback (the nvidia-pytriton wheel's, or one on PATH).

One server for the module, started the way users start it (`dflash-trt serve --target --drafter`, a subprocess) and
stopped the way they stop it (SIGINT); requests over HTTP generate and gRPC streaming; the served fixture pair's
outputs compared with direct `TorchEngine.generate`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from dflash_trt import SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.serve.triton.client import GrpcStream, ServerError, http_generate
from dflash_trt.serve.triton.repository import write_model_repository
from dflash_trt.serve.triton.server import free_port

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "tests" / "fixtures" / "gsm8k-tiny"
MAX_BATCH, MAX_SEQ = 8, 320
QUESTIONS = [json.loads(line)["turns"][0] for line in (ROOT / "data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()[:32]]


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dflash-trt serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://{url}/v2/models/dflash/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"server not ready after {timeout} s:\n{log.read_text()[-3000:]}")


def _start_cli(args: list[str], log: Path) -> tuple[subprocess.Popen, str, str]:
    http, grpc = free_port(), free_port()
    cmd = [sys.executable, "-m", "dflash_trt", "serve", *args, "--host", "127.0.0.1", "--http-port", str(http),
           "--grpc-port", str(grpc), "--log-file", str(log)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"127.0.0.1:{http}"
    _wait_ready(url, proc, log)
    return proc, url, f"127.0.0.1:{grpc}"


def _stop_cli(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return proc.returncode, out.decode(errors="replace")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("triton") / "server.log"
    proc, http, grpc = _start_cli(["--target", str(PAIR / "target"), "--drafter", str(PAIR / "drafter"),
                                   "--max-batch-size", str(MAX_BATCH), "--max-seq-len", str(MAX_SEQ),
                                   "--device", "cpu", "--torch-threads", "1"], log)
    info = {"http": http, "grpc": grpc, "proc": proc, "log": log}
    yield info
    if proc.poll() is None:
        _stop_cli(proc)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def engine():
    return TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=MAX_BATCH,
                                       max_seq_len=MAX_SEQ)


def _direct(engine, prompt, max_tokens):
    return engine.generate([prompt], SamplingParams(max_new_tokens=max_tokens))[0]


def test_http_generate_equals_direct_generate(server, engine):
    want = _direct(engine, QUESTIONS[0], 48)
    got = http_generate(server["http"], QUESTIONS[0], max_tokens=48, temperature=0.0)
    assert got.text == want.text and got.token_ids == want.token_ids
    assert got.finish_reason == want.finish_reason
    steps = len(want.stats.taus)
    assert got.stats["total_draft_tokens"] == steps * 15  # K - 1 drafts per step, K = 16
    assert got.stats["draft_steps"] == {"chain:16": steps}
    assert got.stats["total_accepted_draft_tokens"] == sum(t - 1 for t in want.stats.taus)
    assert got.stats["mean_tau"] == pytest.approx(want.stats.mean_tau, rel=1e-5)
    # token-id prompts too
    ids = engine.tokenizer(QUESTIONS[1], add_special_tokens=False)["input_ids"]
    assert http_generate(server["http"], ids, max_tokens=16).token_ids == _direct(engine, ids, 16).token_ids


def test_grpc_streaming_equals_direct_generate(server, engine):
    want = _direct(engine, QUESTIONS[2], 48)
    stream = GrpcStream(server["grpc"])
    try:
        got = stream.generate(QUESTIONS[2], streaming=True, max_tokens=48)
    finally:
        stream.close()
    assert got.token_ids == want.token_ids and got.text == want.text
    assert got.responses == len(want.stats.taus) + 1  # the prefill's token, then one response per step
    assert got.finish_reason == want.finish_reason
    assert got.stats["mean_tau"] == pytest.approx(want.stats.mean_tau, rel=1e-5)
    assert got.stats["total_draft_tokens"] == 15 * len(want.stats.taus)
    assert got.stats["draft_steps"] == {"chain:16": len(want.stats.taus)}


def test_stop_string_cuts_the_text_and_ends_the_request(server, engine):
    want = _direct(engine, QUESTIONS[7], 48).text
    words = want.split()
    stop = " " + " ".join(words[len(words) // 2: len(words) // 2 + 2])  # two words (several tokens) from the middle
    cut = want[: want.find(stop)]
    for streaming in (False, True):
        stream = GrpcStream(server["grpc"])
        try:
            got = stream.generate(QUESTIONS[7], streaming=streaming, max_tokens=48, stop=[stop])
        finally:
            stream.close()
        assert got.text == cut and got.finish_reason == "stop"  # streamed: no piece of the stop string went out
    assert http_generate(server["http"], QUESTIONS[7], max_tokens=48, stop=[stop]).text == cut


def test_32_concurrent_clients_match_sequential_results(server, engine):
    max_tokens = 24
    sequential = [_direct(engine, q, max_tokens).token_ids for q in QUESTIONS]
    results: dict[int, object] = {}
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            if i % 2:  # half over HTTP, half streaming over gRPC: both paths share the batch
                results[i] = http_generate(server["http"], QUESTIONS[i], max_tokens=max_tokens, timeout=120)
            else:
                s = GrpcStream(server["grpc"])
                try:
                    results[i] = s.generate(QUESTIONS[i], max_tokens=max_tokens, timeout=120)
                finally:
                    s.close()
        except BaseException as err:  # noqa: BLE001  (reported below)
            errors.append(err)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not errors, errors
    assert sorted(results) == list(range(32))  # no request lost
    for i in range(32):
        assert results[i].token_ids == sequential[i], f"client {i} differs from its sequential result"
    batch_sizes = [results[i].stats["batch_size"] for i in range(32)]
    assert max(batch_sizes) > 1 and max(batch_sizes) <= MAX_BATCH  # requests really shared steps


BAD = [
    ({"prompt": ""}, "text_input is empty"),
    ({"prompt": "word " * 400}, "max_seq_len"),
    ({"temperature": -0.5}, "sampling_param_temperature"),
    ({"temperature": float("nan")}, "sampling_param_temperature"),
    ({"top_p": 0.0}, "sampling_param_top_p"),
    ({"top_p": 1.5}, "sampling_param_top_p"),
    ({"stop": np.array([5], dtype=np.int32)}, "sampling_param_stop"),  # a stop that is not a string
    ({"max_tokens": 0}, "sampling_param_max_tokens"),
]


@pytest.mark.parametrize("bad,message", BAD, ids=["empty", "too-long", "neg-temp", "nan-temp", "top_p-0", "top_p-1.5",
                                                 "stop-type", "max_tokens-0"])
def test_bad_request_gets_an_error_and_the_server_keeps_serving(server, engine, bad, message):
    kwargs = dict(bad)
    prompt = kwargs.pop("prompt", QUESTIONS[3])
    kwargs.setdefault("max_tokens", 8)
    stream = GrpcStream(server["grpc"])
    try:
        with pytest.raises(ServerError, match=message):
            stream.generate(prompt, streaming=False, timeout=60, **kwargs)
        assert stream.generate(QUESTIONS[3], max_tokens=8, timeout=60).token_ids == _direct(engine, QUESTIONS[3], 8).token_ids
    finally:
        stream.close()
    if bad.get("temperature") == -0.5:  # the HTTP path reports it too (JSON has no NaN)
        with pytest.raises(ServerError, match=message):
            http_generate(server["http"], prompt, **kwargs)


def test_a_bad_seed_or_field_fails_only_its_own_request(server, engine):
    """A UINT64 seed past 2^63 - 1 (legal for the input's type) and a misspelled field each fail their own request
    with one message; the requests sharing the batch finish with their own outputs."""
    want = {i: _direct(engine, QUESTIONS[i], 24).token_ids for i in (8, 9)}
    results: dict = {}
    errors: dict = {}

    def client(i, **kw):
        s = GrpcStream(server["grpc"])
        try:
            results[i] = s.generate(QUESTIONS[i], max_tokens=24, timeout=120, **kw)
        except ServerError as err:
            errors[i] = str(err)
        finally:
            s.close()

    threads = [threading.Thread(target=client, args=(8,)),
               threading.Thread(target=client, args=(10,), kwargs={"seed": 2**63 + 5, "temperature": 0.7}),
               threading.Thread(target=client, args=(9,))]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(timeout=180)
    assert set(errors) == {10} and "seed must be None or an integer in 0..9223372036854775807" in errors[10]
    assert results[8].token_ids == want[8] and results[9].token_ids == want[9]
    with pytest.raises(ServerError, match="unknown field.*sampling_param_max_token: this model's inputs are"):
        http_generate(server["http"], QUESTIONS[3], max_token=8)
    assert http_generate(server["http"], QUESTIONS[3], max_tokens=8).token_ids == _direct(engine, QUESTIONS[3], 8).token_ids


def test_cancelled_stream_stops_and_frees_its_slot(server, engine):
    budget = MAX_SEQ - len(engine.tokenizer(QUESTIONS[4], add_special_tokens=False)["input_ids"])
    stream = GrpcStream(server["grpc"])
    stream.send(QUESTIONS[4], streaming=True, max_tokens=budget, ignore_eos=True)
    for _ in range(3):  # it is generating
        _, result, error = stream.receive(timeout=60)
        assert error is None and result.as_numpy("output_token_ids").size >= 1
    stream.close(cancel=True)
    time.sleep(0.5)
    # Alone on the server now: if the cancelled request still ran, this one would share steps with it.
    got = http_generate(server["http"], QUESTIONS[5], max_tokens=16)
    assert got.stats["batch_size"] == 1
    assert got.token_ids == _direct(engine, QUESTIONS[5], 16).token_ids
    assert server["proc"].poll() is None


def test_sigint_stops_the_server_cleanly(server):
    code, out = _stop_cli(server["proc"])
    assert code == 0, out
    assert "stopped" in out
    assert "[dflash] finalized" in server["log"].read_text()  # Triton unloaded the model: finalize ran


def test_serve_from_engine_dir_manifest(tmp_path, engine):
    """A hand-made engine directory (docs/engine-dir.md): relative drafter path, runtime options, repository path."""
    d = tmp_path / "engine"
    (d / "drafter").mkdir(parents=True)
    for f in (PAIR / "drafter").iterdir():
        if f.suffix in (".json", ".safetensors"):
            (d / "drafter" / f.name).write_bytes(f.read_bytes())
    manifest = {"format": "dflash-trt-engine", "format_version": 1, "backend": "torch",
                "target": {"path": str(PAIR / "target")}, "drafter": {"path": "drafter"},
                "runtime": {"device": "cpu", "dtype": "float32", "max_batch_size": 2, "max_seq_len": 256, "verify_len": 8},
                "triton": {"model_repository": "triton/model_repository", "model_name": "dflash"}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    write_model_repository(d / "triton" / "model_repository", target=PAIR / "target", drafter=d / "drafter",
                           max_batch_size=2, max_seq_len=256, device="cpu", dtype="float32", verify_len=8)
    log = tmp_path / "server.log"
    proc, http, _ = _start_cli(["--engine-dir", str(d), "--torch-threads", "1"], log)
    try:
        got = http_generate(http, QUESTIONS[6], max_tokens=16)
        want = engine.generate([QUESTIONS[6]], SamplingParams(max_new_tokens=16), verify_len=8)[0]
        assert got.token_ids == want.token_ids
        assert got.stats["total_draft_tokens"] == 7 * len(want.stats.taus)  # verify_len 8 from the manifest
        with pytest.raises(ServerError, match="max_seq_len 256"):  # the manifest's, not the default
            http_generate(http, "word " * 300, max_tokens=16)
    finally:
        code, out = _stop_cli(proc)
    assert code == 0, out


def test_serve_built_engine_dir(tmp_path, engine):
    """`dflash-trt build` (FP8 drafter, draft auto) then `dflash-trt serve --engine-dir`: the repository the build
    wrote is served as it is (its drafter path is relative to the model directory) and greedy outputs are the target's
    own; the engine directory still serves after being moved; auto starts from the build's measured curve and reports
    the drafts it chose (draft_steps), their draft tokens counted per step."""
    from dflash_trt.cli import main

    sets = ["quantization.calibration.num_samples=4", "quantization.calibration.max_new_tokens=32",
            "quantization.gate.num_prompts=4", "quantization.gate.max_new_tokens=32",
            "quantization.gate.max_tau_drop=0.5", "max_batch_size=2", "max_seq_len=256", "draft=auto"]
    argv = ["build", "--config", str(ROOT / "build_configs/tiny-gsm8k-cpu.yaml"), "--output", str(tmp_path / "built"),
            "--no-progress"]
    assert main(argv + [a for s in sets for a in ("--set", s)]) == 0
    moved = tmp_path / "moved"
    (tmp_path / "built").rename(moved)
    log = tmp_path / "server.log"
    proc, http, _ = _start_cli(["--engine-dir", str(moved), "--torch-threads", "1"], log)
    try:
        got = http_generate(http, QUESTIONS[7], max_tokens=24)
        want = engine.generate([QUESTIONS[7]], SamplingParams(max_new_tokens=24), use_drafter=False)[0]
        assert got.token_ids == want.token_ids
        # its steps by draft: as many as emitted its tokens after the prefill's (raw text, without the chat template
        # the pair was trained on: drafts accept little, and auto may hold AR throughout)
        drafts = got.stats["draft_steps"]
        assert got.stats["mean_tau"] * sum(drafts.values()) == pytest.approx(len(got.token_ids) - 1)
        # each step's draft tokens: K - 1 a chain, N - 1 a tree, none an AR step
        assert got.stats["total_draft_tokens"] == sum((int(d.partition(":")[2]) - 1) * n for d, n in drafts.items())
    finally:
        code, out = _stop_cli(proc)
    assert code == 0, out
    text = log.read_text()
    assert f"drafter={moved / 'drafter'}" in text  # resolved against the moved model directory
    assert "draft_prior=measured" in text  # the build's acceptance curve, from the repository's parameters


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkilled_serve_takes_tritonserver_with_it(tmp_path):
    """`kill -9` of dflash-trt serve: tritonserver (and its backend stubs) stop answering and exit; the next serve
    removes the temporary model repository the killed one left."""
    import tempfile

    from dflash_trt.serve.cli import TEMP_REPOSITORY_PREFIX
    from dflash_trt.tempdirs import remove_stale

    log = tmp_path / "server.log"
    proc, http, _ = _start_cli(["--target", str(PAIR / "target"), "--drafter", str(PAIR / "drafter"),
                                "--max-batch-size", "1", "--max-seq-len", "128", "--device", "cpu",
                                "--torch-threads", "1"], log)
    servers = _children(proc.pid)
    assert servers, "tritonserver is a child of dflash-trt serve"
    family = servers + [k for s in servers for k in _children(s)]  # tritonserver and its Python backend stubs
    leftovers = list(Path(tempfile.gettempdir()).glob(f"{TEMP_REPOSITORY_PREFIX}{proc.pid}-*"))
    assert leftovers
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_running(p) for p in family):
        time.sleep(0.2)
    assert not any(_running(p) for p in family), [p for p in family if _running(p)]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{http}/v2/health/ready", timeout=2)
    removed = remove_stale(tempfile.gettempdir(), TEMP_REPOSITORY_PREFIX)
    assert set(leftovers) <= set(removed) and not any(p.exists() for p in leftovers)


def test_serve_errors_are_one_line(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "dflash_trt", "serve", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)

    r = run("--engine-dir", str(tmp_path))
    assert r.returncode == 2 and "no manifest.json" in r.stderr and "Traceback" not in r.stderr
    r = run("--target", str(PAIR / "target"))
    assert r.returncode == 2 and "--drafter is required" in r.stderr
    r = run("--target", str(PAIR / "target"), "--drafter", str(PAIR / "drafter"), "--http-port", "70000")
    assert r.returncode == 2 and "--http-port" in r.stderr
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "dflash-trt-engine", "format_version": 9}))
    r = run("--engine-dir", str(tmp_path))
    assert r.returncode == 2 and "format_version" in r.stderr


def test_write_model_repository(tmp_path):
    from dflash_trt.errors import ConfigError

    repo = write_model_repository(tmp_path / "repo", target=PAIR / "target", drafter=PAIR / "drafter", max_batch_size=4,
                                  max_seq_len=512, device="auto", dtype="bfloat16", verify_len=8)
    write_model_repository(repo, target=PAIR / "target", drafter=None, speculative=False, model_name="ar")
    assert sorted(p.name for p in repo.iterdir()) == ["ar", "dflash"]  # side by side, nothing else in the repository
    config = (repo / "dflash" / "config.pbtxt").read_text()
    assert (repo / "dflash" / "1" / "model.py").read_text().count("class TritonPythonModel") == 1
    for line in ('backend: "python"', "decoupled: true", "max_batch_size: 0", "kind: KIND_CPU",
                 f'key: "drafter" value: {{ string_value: "{(PAIR / "drafter").resolve()}" }}',
                 'key: "max_batch_size" value: { string_value: "4" }', 'key: "verify_len" value: { string_value: "8" }',
                 'key: "device" value: { string_value: "auto" }', 'key: "dtype" value: { string_value: "bfloat16" }',
                 'name: "text_input" data_type: TYPE_STRING', 'name: "sampling_param_max_tokens" data_type: TYPE_INT32',
                 'name: "total_accepted_draft_tokens" data_type: TYPE_INT32'):
        assert line in config, line
    assert str(Path(__file__).resolve().parents[1]) in config  # python_path: where dflash_trt lives
    assert 'key: "speculative" value: { string_value: "false" }' in (repo / "ar" / "config.pbtxt").read_text()
    with pytest.raises(ConfigError, match="drafter directory is required"):
        write_model_repository(repo, target=PAIR / "target", drafter=None)
    with pytest.raises(ConfigError, match="max_batch_size"):
        write_model_repository(repo, target=PAIR / "target", drafter=PAIR / "drafter", max_batch_size=0)
    with pytest.raises(ConfigError, match="is not a directory"):
        write_model_repository(repo, target=tmp_path / "nope", drafter=PAIR / "drafter")
