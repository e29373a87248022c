"""Nothing silently wrong, nothing lost: what a new user hits with corrupted checkpoints, bad requests, several
threads, a request that fails inside a running batch, --force on the wrong directory, damaged engine directories and
killed processes. Each case ends in one clear error naming the field (or file) and the fix, or in correct output for
everything that was not at fault. (Triton-side cases are in test_triton.py; the last-layer tap in test_models.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from dflash_trt import SamplingParams, checkpoint as ckpt
from dflash_trt.cli import main
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import CheckpointError, ConfigError, RequestError
from dflash_trt.tempdirs import make_tempdir, remove_stale
from conftest import copy_checkpoint, edit_safetensors

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "tests" / "fixtures" / "gsm8k-tiny"
PROMPTS = [json.loads(line)["turns"][0] for line in (ROOT / "data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()[:6]]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def engine():
    return TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=4, max_seq_len=320)


# ---- checkpoints: every tensor accounted for, every value finite --------------------------------------------------------


def test_target_with_more_layers_than_its_config_is_refused(make_pair, tmp_path, capsys):
    target, drafter = make_pair(vocab_size=128)
    bad = copy_checkpoint(Path(target), tmp_path / "target")
    layers = ckpt.load_target_config(bad).num_hidden_layers

    def add_layer(t):
        for name in [n for n in t if n.startswith("model.layers.0.")]:
            t[name.replace("layers.0.", f"layers.{layers}.")] = t[name].clone()

    edit_safetensors(bad, add_layer)
    with pytest.raises(CheckpointError, match=rf"unexpected tensor\(s\) model\.layers\.{layers}\.") as err:
        ckpt.load_target_tensors(bad, ckpt.load_target_config(bad))
    assert "num_hidden_layers" in str(err.value)
    rc = main(["generate", "--target", str(bad), "--no-draft", "--prompt", "hi"])
    err_text = capsys.readouterr().err
    assert rc == 2 and "unexpected tensor" in err_text and "Traceback" not in err_text


def test_unexpected_drafter_tensor_is_refused_and_tolerated_extras_load(make_pair, tmp_path):
    target, drafter = make_pair(vocab_size=128)
    bad = copy_checkpoint(Path(drafter), tmp_path / "drafter")
    edit_safetensors(bad, lambda t: t.__setitem__("embed_tokens.weight", torch.zeros(128, t["norm.weight"].shape[0])))
    with pytest.raises(CheckpointError, match=r"unexpected tensor\(s\) embed_tokens\.weight"):
        ckpt.load_drafter_tensors(bad, ckpt.load_drafter_config(bad))
    # What transformers itself ignores still loads: a tied head saved anyway, old RoPE tables.
    tied, _ = make_pair(vocab_size=128, tie=True)
    ok = copy_checkpoint(Path(tied), tmp_path / "tied")

    def extras(t):
        t["lm_head.weight"] = t["model.embed_tokens.weight"].clone()
        t["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(8)

    edit_safetensors(ok, extras)
    ckpt.load_target_tensors(ok, ckpt.load_target_config(ok))


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_non_finite_weights_are_refused_at_load(make_pair, tmp_path, value):
    target, drafter = make_pair(vocab_size=128)
    bad = copy_checkpoint(Path(drafter), tmp_path / "drafter")

    def poison(t):
        t["layers.0.mlp.up_proj.weight"][3, 5] = value

    edit_safetensors(bad, poison)
    with pytest.raises(CheckpointError, match=r"'layers\.0\.mlp\.up_proj\.weight' has 1 NaN/Inf"):
        TorchEngine.from_pretrained(target, bad, device="cpu", tokenizer=False)


# ---- requests: one documented range for every field, nothing silently reinterpreted -------------------------------------


@pytest.mark.parametrize("prompts, params, message", [
    ([PROMPTS[0]], {"max_new_tokens": 4}, "params must be a SamplingParams, got dict"),
    ([["12", "7"]], None, "prompt token ids must be ints, got '12'"),
    ([[12.0, 7.5]], None, "prompt token ids must be ints, got 12.0"),
    ([torch.tensor([1.0, 2.0])], None, "must be integers, got an array of torch.float32"),
    ([b"Question: 2 + 2?"], None, "prompt is bytes"),
    (b"Question: 2 + 2?", None, "prompts must be a list"),
    (["caf\udcff"], None, "not valid UTF-8"),
    ([PROMPTS[0]], SamplingParams(stop_token_ids=(True,)), "stop_token_ids has True"),
    ([PROMPTS[0]], SamplingParams(stop_token_ids=5), "stop_token_ids must be a list"),
    ([PROMPTS[0]], SamplingParams(temperature=float("inf")), "temperature must be a finite number"),
    ([PROMPTS[0]], SamplingParams(temperature=float("nan")), "temperature must be a finite number"),
    ([PROMPTS[0]], SamplingParams(seed=2**63), "seed must be None or an integer in 0..9223372036854775807"),
    ([PROMPTS[0]], SamplingParams(seed=-1), "seed must be None"),
    ([PROMPTS[0]], SamplingParams(ignore_eos="yes"), "ignore_eos must be true or false"),
], ids=["params-dict", "str-ids", "float-ids", "float-tensor", "bytes-prompt", "bytes-prompts", "surrogate", "bool-stop",
        "int-stops", "inf-temp", "nan-temp", "seed-2^63", "seed-neg", "ignore-eos-str"])
def test_bad_requests_are_one_clear_error(engine, prompts, params, message):
    with pytest.raises(RequestError, match=message.replace("(", r"\(").replace("?", r"\?")):
        engine.generate(prompts, params)


def test_largest_seed_and_integer_arrays_are_accepted(engine):
    import numpy as np

    ids = engine.tokenizer(PROMPTS[0], add_special_tokens=False)["input_ids"]
    p = SamplingParams(max_new_tokens=6, temperature=0.9, seed=2**63 - 1)
    want = engine.generate([ids], p)[0].token_ids
    assert engine.generate([torch.tensor(ids)], p)[0].token_ids == want
    assert engine.generate([np.array(ids, dtype=np.int32)], p)[0].token_ids == want


def test_max_seq_len_is_checked_before_allocating(make_pair):
    with pytest.raises(ConfigError, match="max_seq_len 1000000000 exceeds the target's max_position_embeddings 1024"):
        TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_seq_len=10**9)
    target, drafter = make_pair(vocab_size=128)
    with pytest.raises(ConfigError, match=r"KV caches .* need .* GiB but cpu has .* GiB free: lower --max-seq-len"):
        TorchEngine.from_pretrained(target, drafter, device="cpu", max_batch_size=10**7, max_seq_len=4096,
                                    tokenizer=False)
    # the default fits the target: 2048, or its max_position_embeddings if smaller
    assert TorchEngine.from_pretrained(PAIR / "target", None, device="cpu", max_batch_size=1).max_seq_len == 1024


def test_non_utf8_command_line_prompt_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "dflash_trt", "generate", "--target", os.fsencode(PAIR / "target"),
                        "--no-draft", "--prompt", b"caf\xff"], capture_output=True, cwd=ROOT, timeout=300)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2 and "not valid UTF-8" in err and "Traceback" not in err, err


# ---- a request that fails inside a running batch fails alone ------------------------------------------------------------


def _poison(engine, monkeypatch, sched, rid, when):
    """The target forward raises whenever request `rid` takes part and when(call) says so (call: prefill or decode
    number of that request)."""
    real = type(engine.target).forward
    calls = {"prefill": 0, "decode": 0}

    def forward(self, input_ids, cache, slots, **kw):
        slot = sched.slot_of(rid)
        if slot is not None and slot in slots.tolist():
            phase = "prefill" if kw.get("logits_at") is not None else "decode"
            calls[phase] += 1
            if when(phase, calls[phase]):
                raise RuntimeError(f"poisoned {phase}")
        return real(self, input_ids, cache, slots, **kw)

    monkeypatch.setattr(type(engine.target), "forward", forward)


@pytest.mark.parametrize("pipeline", [False, True], ids=["", "pipelined"])
@pytest.mark.parametrize("when", ["prefill", "decode"])
def test_a_failing_request_fails_alone_and_the_batch_finishes_correctly(engine, monkeypatch, when, pipeline):
    """pipelined: windows launched ahead (on by default with CUDA graphs; forced here): a failure drops them, and the
    requests re-run alone are prefilled only after every launched window is read."""
    params = [SamplingParams(max_new_tokens=40, ignore_eos=True),
              SamplingParams(max_new_tokens=32, temperature=0.8, top_p=0.9, seed=3, ignore_eos=True),
              SamplingParams(max_new_tokens=24, ignore_eos=True)]
    alone = [engine.generate([PROMPTS[i]], params[i])[0].token_ids for i in range(3)]
    out: dict = {}
    finished: dict = {}

    def collect(events):
        for e in events:
            out.setdefault(e.index, []).extend(e.token_ids)
            if e.finished:
                finished[e.index] = e

    sched = engine.new_scheduler()
    sched._pipeline = pipeline
    sched.add(0, PROMPTS[0], params[0])
    collect(sched.step())  # request 0 is running when the others arrive
    sched.add(1, PROMPTS[1], params[1])
    sched.add("poison", PROMPTS[3], SamplingParams(max_new_tokens=40, ignore_eos=True))
    sched.add(2, PROMPTS[2], params[2])
    if when == "prefill":  # its prefill always fails (it is prefilled together with 1 and 2)
        _poison(engine, monkeypatch, sched, "poison", lambda phase, n: phase == "prefill")
    else:  # its third decode step and every one after fail (it decodes together with 0, 1, 2)
        _poison(engine, monkeypatch, sched, "poison", lambda phase, n: phase == "decode" and n >= 3)
    while sched.has_work:
        collect(sched.step())
    assert finished["poison"].finish_reason == "error"
    assert f"RuntimeError: poisoned {when}" in finished["poison"].result.error
    for i in range(3):
        assert finished[i].finish_reason == "length"
        assert out[i] == finished[i].result.token_ids == alone[i], f"request {i} changed"
    assert sched.num_active == 0 and len(sched._free) == engine.max_batch_size


def test_generate_reports_the_failed_prompt_and_finishes_the_others(engine, monkeypatch):
    p = SamplingParams(max_new_tokens=12, ignore_eos=True)
    alone = engine.generate(PROMPTS[:3], p)
    real = type(engine.target).forward
    used = {t for prompt in PROMPTS[:3] for t in engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]}
    bad_token = next(t for t in range(2, engine.target.cfg.vocab_size) if t not in used)

    def forward(self, input_ids, cache, slots, **kw):
        if kw.get("logits_at") is not None and bool((input_ids == bad_token).any()):
            raise RuntimeError("cannot prefill a zebra")
        return real(self, input_ids, cache, slots, **kw)

    monkeypatch.setattr(type(engine.target), "forward", forward)
    results = engine.generate(PROMPTS[:2] + [[bad_token] * 5] + PROMPTS[2:3], p)
    assert [r.finish_reason for r in results] == ["length", "length", "error", "length"]
    assert "cannot prefill a zebra" in results[2].error
    assert [r.token_ids for r in results[:2] + results[3:]] == [r.token_ids for r in alone]


# ---- one engine, several users ----------------------------------------------------------------------------------------


def test_concurrent_generate_calls_get_their_own_outputs(engine):
    p = SamplingParams(max_new_tokens=16, ignore_eos=True)
    want = {i: engine.generate([PROMPTS[i]], p)[0].token_ids for i in range(4)}
    got: dict = {}
    errors: list = []

    def user(i):
        try:
            for _ in range(3):
                got.setdefault(i, []).append(engine.generate([PROMPTS[i]], p)[0].token_ids)
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=user, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors
    assert all(got[i] == [want[i]] * 3 for i in range(4))


def test_a_paused_stream_is_not_corrupted_by_generate(engine):
    p = SamplingParams(max_new_tokens=20, ignore_eos=True)
    want = engine.generate([PROMPTS[0]], p)[0].token_ids
    stream = engine.stream([PROMPTS[0]], p)
    first = next(stream)
    with pytest.raises(RequestError, match="already running a stream"):
        engine.generate([PROMPTS[1]], p)
    # another thread waits for the stream instead of breaking it
    other: list = []
    t = threading.Thread(target=lambda: other.append(engine.generate([PROMPTS[1]], p)[0].token_ids))
    t.start()
    time.sleep(0.5)
    assert t.is_alive()
    tokens = first.token_ids + [tok for e in stream for tok in e.token_ids]
    t.join(timeout=300)
    assert tokens == want
    assert other == [engine.generate([PROMPTS[1]], p)[0].token_ids]
    # a stream closed early frees the engine
    s = engine.stream([PROMPTS[2]], p)
    next(s)
    s.close()
    assert engine.generate([PROMPTS[0]], p)[0].token_ids == want


def test_a_scheduler_whose_caches_were_taken_refuses_to_step(engine):
    old = engine.new_scheduler()
    old.add("a", PROMPTS[0], SamplingParams(max_new_tokens=4))
    old.step()
    engine.generate([PROMPTS[1]], SamplingParams(max_new_tokens=4))
    with pytest.raises(RequestError, match="no longer owns the engine's caches"):
        old.step()


# ---- build --force and leftovers ----------------------------------------------------------------------------------------


def _build(*argv) -> int:
    sets = {"quantization.format": "none", "quantization.calibration.num_samples": 4}
    args = ["build", "--config", str(ROOT / "build_configs/tiny-gsm8k-cpu.yaml"), "--no-progress", *argv]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    return main(args)


def test_force_never_deletes_the_inputs_or_a_foreign_directory(tmp_path, capsys):
    home = tmp_path / "models"
    shutil.copytree(PAIR, home)
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    rc = _build("--force", "--output", str(home), "--set", f"target={home / 'target'}", "--set",
                f"drafter={home / 'drafter'}")
    err = capsys.readouterr().err
    assert rc == 2 and "contains the checkpoint" in err and "Traceback" not in err
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me")
    rc = _build("--force", "--output", str(foreign))
    err = capsys.readouterr().err
    assert rc == 2 and "not an engine directory written by dflash-trt build" in err
    assert (foreign / "todo.txt").read_text() == "keep me"
    # what --force is for: replacing an engine directory (and an empty directory is fine too)
    (tmp_path / "empty").mkdir()
    assert _build("--force", "--output", str(tmp_path / "empty")) == 0
    assert _build("--force", "--output", str(tmp_path / "empty")) == 0
    assert (tmp_path / "empty" / "manifest.json").is_file()


def test_a_killed_writers_temp_dirs_are_removed_by_the_next_one(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = tmp_path / f".engine.{dead.pid}-abc123"
        stale.mkdir()
        (stale / "model.safetensors").write_bytes(b"half")
        (tmp_path / f".engine.{dead.pid}-old").mkdir()
        busy = tmp_path / f".engine.{live.pid}-def456"
        busy.mkdir()
        unrelated = tmp_path / ".engine.notapid-x"
        unrelated.mkdir()
        with ckpt.atomic_directory(tmp_path / "engine") as tmp:
            (tmp / "f").write_text("x")
        assert not stale.exists() and not (tmp_path / f".engine.{dead.pid}-old").exists()
        assert busy.is_dir() and unrelated.is_dir()  # a live writer's and a stranger's are left alone
        assert (tmp_path / "engine" / "f").read_text() == "x"
        assert remove_stale(tmp_path, ".engine.") == []
        own = make_tempdir(tmp_path, "x-")
        assert own.name.startswith(f"x-{os.getpid()}-")
    finally:
        live.kill()


# ---- engine directories: every file present, the right size, the right checksum ----------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("engine") / "tiny"
    assert _build("--output", str(out)) == 0
    return out


def test_damaged_engine_dirs_are_caught_before_loading(built, tmp_path, capsys):
    from dflash_trt.manifest import load_manifest

    assert main(["doctor", "--engine-dir", str(built)]) == 0
    capsys.readouterr()
    # zeroed checksums: doctor recomputes them
    zeroed = copy_checkpoint(built, tmp_path / "zeroed")
    m = load_manifest(zeroed)
    m["checksums"] = {k: "sha256:" + "0" * 64 for k in m["checksums"]}
    (zeroed / "manifest.json").write_text(json.dumps(m))
    assert main(["doctor", "--engine-dir", str(zeroed)]) == 2
    assert "sha256 differs" in capsys.readouterr().err
    # a missing drafter file: doctor and generate name it
    missing = copy_checkpoint(built, tmp_path / "missing")
    (missing / "drafter" / "model.safetensors").unlink()
    for argv in (["doctor", "--engine-dir", str(missing)],
                 ["generate", "--engine-dir", str(missing), "--prompt", "hi", "--max-new-tokens", "2"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "drafter/model.safetensors" in err and "missing" in err and "Traceback" not in err
    # a truncated one: generate refuses it from its size, before reading weights
    cut = copy_checkpoint(built, tmp_path / "cut")
    weights = cut / "drafter" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: 1000])
    assert main(["generate", "--engine-dir", str(cut), "--prompt", "hi", "--max-new-tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert "1000 bytes" in err and "truncated" in err


def test_doctor_finds_the_tritonserver_serve_uses():
    from dflash_trt import doctor
    from dflash_trt.serve.triton.server import locate_tritonserver

    found = locate_tritonserver()
    if found["server"] is None:
        pytest.skip("no tritonserver here (pip install 'dflash-trt[serve]')")
    m = doctor.Machine(triton=doctor.probe_triton())
    assert m.triton["server"] == found["server"]
    assert doctor.check_requirement("triton-python", m) is None
