"""The torch.compile'd step (`TorchEngine(compile=True)`, `--compile`): the one step traced whole by Inductor, which
must emit exactly what the eager step emits — greedy token for token = AR, same-seed samples = AR's, stop tokens and
budgets inside a block — for chains, trees and AR, ragged batches, windows of 1 and 4 steps. The trained fixture pair
gives real, ragged acceptance. Compiling costs seconds per step variant, so one engine per window serves the module
and each test covers several cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

from dflash_trt import SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import ConfigError
from dflash_trt.spec.sampling import SamplingModes, _read_modes, target_tokens

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "gsm8k-tiny"
PROMPTS = [json.loads(line)["turns"][0] for line in
           (ROOT / "data" / "prompts" / "eagle_gsm8k.jsonl").read_text().splitlines()[:4]]


def _engine(compile: bool, window: int = 1) -> TorchEngine:
    return TorchEngine.from_pretrained(FIXTURE / "target", FIXTURE / "drafter", device="cpu", max_batch_size=4,
                                       max_seq_len=384, decode_loop="device" if window > 1 else "host",
                                       steps_per_sync=window, compile=compile)


@pytest.fixture(scope="module")
def eager():
    counters.clear()
    return _engine(False)


_COMPILED: dict[int, TorchEngine] = {}  # one compiled engine per window for the whole module (its graphs compile once)


def _compiled(window: int) -> TorchEngine:
    if window not in _COMPILED:
        _COMPILED[window] = _engine(True, window)
    return _COMPILED[window]


@pytest.fixture(scope="module", params=[1, 4], ids=["window1", "window4"])
def compiled(request, eager):
    return _compiled(request.param)


@pytest.fixture(scope="module")
def compiled1(eager):
    """Window 1 only: each new mix of sampling modes is a few more graphs to compile (minutes on a cold cache), and
    a window of 4 runs the same sampling code (the frozen rows are covered by the greedy and stop tests)."""
    return _compiled(1)


def _tokens(results):
    return [r.token_ids for r in results]


def test_greedy_equals_ar(eager, compiled):
    params = SamplingParams(max_new_tokens=40, ignore_eos=True)
    ar = _tokens(eager.generate(PROMPTS, params, use_drafter=False))
    assert _tokens(compiled.generate(PROMPTS, params, use_drafter=False)) == ar  # the compiled AR step
    spec = compiled.generate(PROMPTS, params, draft="chain:16")  # a ragged batch of 4
    assert _tokens(spec) == ar
    taus = [t for r in spec for t in r.stats.taus]
    assert max(taus) > 4 and min(taus) == 1  # real, ragged acceptance: the drafts were used, not just verified
    assert _tokens(compiled.generate(PROMPTS[1:2], params, draft="chain:16")) == ar[1:2]  # batch 1
    if compiled.steps_per_sync == 1:  # a draft tree, compiled (its K/V compaction through the custom op)
        tree = compiled.generate(PROMPTS, params, draft="tree:8")
        assert _tokens(tree) == ar and max(t for r in tree for t in r.stats.taus) > 2
    assert compiled.step_runner.compiled and not eager.step_runner.compiled


def test_stop_and_budget_inside_a_block(eager, compiled):
    free = _tokens(eager.generate(PROMPTS, SamplingParams(max_new_tokens=30, ignore_eos=True), use_drafter=False))
    stops = tuple(sorted({t[9] for t in free}))  # from the middle of each continuation: a stop inside a block
    for params, reason in ((SamplingParams(max_new_tokens=30, ignore_eos=True, stop_token_ids=stops), "stop"),
                           (SamplingParams(max_new_tokens=7, ignore_eos=True), "length")):
        ar = eager.generate(PROMPTS, params, use_drafter=False)
        spec = compiled.generate(PROMPTS, params, draft="chain:16")
        assert _tokens(spec) == _tokens(ar)
        assert [r.finish_reason for r in spec] == [r.finish_reason for r in ar] == [reason] * len(PROMPTS)


def test_sampling_same_seed_equals_ar(eager, compiled1):
    """The keyed samples of the compiled step = the eager AR step's, with temperature, top-k and top-p rows in one
    batch (the step reads the batch's SamplingModes from the host, never off the device)."""
    params = [SamplingParams(max_new_tokens=24, temperature=t, top_k=k, top_p=p, seed=s, ignore_eos=True)
              for s, (t, k, p) in enumerate([(1.0, 0, 1.0), (0.7, 20, 1.0), (1.3, 0, 0.9), (0.0, 0, 1.0)])]
    ar = _tokens(eager.generate(PROMPTS, params, use_drafter=False))
    assert _tokens(compiled1.generate(PROMPTS, params, draft="chain:16")) == ar
    assert _tokens(compiled1.generate(PROMPTS, params, use_drafter=False)) == ar


def test_the_step_compiles_whole():
    """Runs after the tests above (pytest keeps file order): Dynamo traced graphs, and never broke one (a graph break
    means a host read or untraceable code inside the step: slower, and a CUDA graph could not capture it)."""
    assert counters["stats"]["unique_graphs"] > 0
    assert not counters["graph_break"], dict(counters["graph_break"])


def test_windows_that_compile_are_not_taken_for_costs(eager):
    """A window that compiled a graph took seconds that say nothing of what its steps cost: the scheduler does not
    give its time to the draft budget (auto, trusting it, once priced its probes 8x and held a compiled engine at AR
    for a whole benchmark). Every other window's time is given, once."""
    def run(engine):
        step, flags, observed = engine.step_runner, [], []
        read = step.read  # a window's host read: what the scheduler learns of it

        def recording(*args, **kwargs):
            out = read(*args, **kwargs)
            flags.append(out.warmup)
            return out

        step.read = recording
        try:
            scheduler = engine.new_scheduler(draft="chain:5")
            scheduler.budget.observe_time = lambda n, draft, seconds, length: observed.append(seconds)
            scheduler.add(0, PROMPTS[0], SamplingParams(max_new_tokens=40, ignore_eos=True))
            while scheduler.has_work:
                scheduler.step()
        finally:
            del step.read
        return flags, observed

    flags, observed = run(_engine(True))  # a fresh engine: its first window compiles (later ones of a module
    assert flags[0] and not all(flags)  # engine may reuse a graph made dynamic in K); later ones ran the graph
    assert len(observed) == flags.count(False)
    flags, observed = run(eager)
    assert not any(flags) and len(observed) == len(flags)


def test_compile_is_refused_where_it_cannot_run(tmp_path):
    from dflash_trt import tiny

    target = tiny.make_hf_target(tmp_path / "target", tiny.gpt_oss_config(vocab_size=64, eos_id=0, hidden=64, layers=2))
    with pytest.raises(ConfigError, match="compile: the gpt_oss target"):
        TorchEngine.from_pretrained(target, None, device="cpu", tokenizer=False, max_batch_size=1, max_seq_len=64,
                                    compile=True)
    with pytest.raises(ConfigError, match="compile must be true or false"):
        TorchEngine.from_pretrained(FIXTURE / "target", None, device="cpu", max_batch_size=1, compile="yes")


def test_sampling_modes_from_the_host_equal_the_device_read():
    """SamplingModes.of (what the step passes) = what the reference reads off the tensors, and the tokens are the same
    either way, for random mixes of greedy, temperature, top-k and top-p rows."""
    g = torch.Generator().manual_seed(0)
    vocab = 50
    for trial in range(40):
        n = 1 + trial % 4
        rows = [(float(torch.rand((), generator=g)) * 1.5 * int(torch.randint(0, 2, (), generator=g)),
                 int(torch.randint(0, 3, (), generator=g)) * int(torch.randint(0, 70, (), generator=g)),
                 1.0 if torch.rand((), generator=g) < 0.5 else 0.5 + 0.5 * float(torch.rand((), generator=g)))
                for _ in range(n)]
        temperature = torch.tensor([r[0] for r in rows])
        top_k, top_p = torch.tensor([r[1] for r in rows]), torch.tensor([r[2] for r in rows])
        modes = SamplingModes.of(rows, vocab)
        assert modes == _read_modes(temperature, top_k, top_p, vocab)
        logits = torch.randn(n, 3, vocab, generator=g)
        keys, positions = torch.randint(0, 2**31, (n,), generator=g), torch.randint(0, 500, (n, 3), generator=g)
        assert torch.equal(target_tokens(logits, temperature, top_k, top_p, keys, positions, modes),
                           target_tokens(logits, temperature, top_k, top_p, keys, positions))


def test_compile_reaches_the_engine_from_every_front_end(tmp_path, capsys):
    """--compile on generate runs the compiled step (identical to AR); bench refuses it without a warm-up (compiling
    would be timed); a Triton model repository carries it to the model's engine."""
    from dflash_trt import cli
    from dflash_trt.serve.triton.repository import write_model_repository

    argv = ["--target", str(FIXTURE / "target"), "--drafter", str(FIXTURE / "drafter"), "--device", "cpu"]
    assert cli.main(["generate", *argv, "--prompt", "Question: 2 + 3 = ?\nAnswer:", "--max-new-tokens", "16",
                     "--compile", "--check-ar", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["matches_ar"] == [True] and report["results"][0]["stats"]["steps"] >= 1
    assert cli.main(["bench", *argv, "--dataset", str(ROOT / "data" / "prompts" / "eagle_gsm8k.jsonl"),
                     "--compile", "--warmup", "0"]) == 2
    assert "--compile needs --warmup >= 1" in capsys.readouterr().err
    for flag in (True, False):
        repo = write_model_repository(tmp_path / f"repo-{flag}", target=FIXTURE / "target",
                                      drafter=FIXTURE / "drafter", compile=flag)
        line = f'key: "compile" value: {{ string_value: "{"true" if flag else "false"}" }}'
        assert line in (repo / "dflash" / "config.pbtxt").read_text()


@pytest.mark.gpu
@pytest.mark.parametrize("decode_loop", ["host", "device"])
def test_compiled_step_on_gpu_matches_ar(decode_loop):
    """On a GPU: the compiled step (Triton kernels from Inductor around the plugin ops), eagerly per step or captured
    in the device loop's CUDA graphs after its compiled first run, gives the target's own greedy tokens."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    make = dict(device="cuda", max_batch_size=4, max_seq_len=384)
    ar = TorchEngine.from_pretrained(FIXTURE / "target", FIXTURE / "drafter", **make)
    compiled = TorchEngine.from_pretrained(FIXTURE / "target", FIXTURE / "drafter", compile=True,
                                           decode_loop=decode_loop, steps_per_sync=4, **make)
    params = SamplingParams(max_new_tokens=48, ignore_eos=True)
    want = _tokens(ar.generate(PROMPTS, params, use_drafter=False))
    assert _tokens(compiled.generate(PROMPTS, params, draft="chain:16")) == want
    assert _tokens(compiled.generate(PROMPTS, params, use_drafter=False)) == want
    if compiled.step_runner.cuda_graphs:
        assert compiled.step_runner.graph_replays > 0
