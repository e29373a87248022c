"""The one step (spec/step.py) run as windows of N steps (the device loop) against windows of one step (the host loop)
and against AR: token for token, greedy and sampled, with in-flight joins, stop tokens and budgets inside a window,
and aborts. On CPU the step runs eagerly (the references, or the kernels under emulation in test_spec_lossless.py); on
a GPU (marked `gpu`) it runs the plugin kernels and is replayed from CUDA graphs, padded to batch buckets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dflash_trt.engines.requests import MAX_STOP_IDS
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import ConfigError, RequestError
from dflash_trt.spec.budget import Draft
from dflash_trt.spec.sampling import SamplingParams
from dflash_trt.spec.step import bucket_sizes, length_bucket
from test_budget import Scripted  # noqa: E402 (tests/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "tests/fixtures/gsm8k-tiny"
QUESTIONS = [json.loads(line)["turns"][0] for line in (ROOT / "data/prompts/eagle_gsm8k.jsonl").read_text().splitlines()]
PROMPTS = [f"Question: {q}\nAnswer:" for q in QUESTIONS[:7]]


def require_gpu_plugins() -> None:
    """Skip unless a CUDA GPU and the plugin library built for it are here (what the device loop's graphs need)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from dflash_trt.kernels import cuda

    if not cuda.available("cuda"):
        pytest.skip("the plugin library is not built for this GPU (scripts/build_plugins.sh)")


@pytest.fixture(scope="module")
def engines():
    def make(loop, steps=3, device="cpu", dtype=None):
        return TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device=device, dtype=dtype,
                                           max_batch_size=4, max_seq_len=512, decode_loop=loop, steps_per_sync=steps)

    return make


def test_buckets():
    assert bucket_sizes(1) == [1] and bucket_sizes(8) == [1, 2, 4, 8] and bucket_sizes(6) == [1, 2, 4, 6]
    assert length_bucket(10, 1000) == 64 and length_bucket(65, 1000) == 128 and length_bucket(900, 1000) == 1000


@pytest.mark.parametrize("steps, params", [
    (1, SamplingParams(max_new_tokens=48)),                                                  # greedy, one step a window
    (4, SamplingParams(max_new_tokens=48)),                                                  # EOS inside windows
    (3, SamplingParams(max_new_tokens=17)),                                                  # budget cut mid-window
    (3, SamplingParams(max_new_tokens=48, temperature=0.8, top_k=40, top_p=0.9, seed=11)),   # sampled
], ids=["greedy-1", "greedy-4", "budget-3", "sampled-3"])
def test_device_loop_equals_host_loop_and_ar(engines, steps, params):
    """7 prompts through 4 slots (requests join as others finish): the device loop gives the host loop's tokens,
    finish reasons and per-step τ, and the tokens are AR's."""
    host, dev = engines("host"), engines("device", steps)
    want, got = host.generate(PROMPTS, params), dev.generate(PROMPTS, params)
    ar = host.generate(PROMPTS, params, use_drafter=False)
    assert [r.token_ids for r in got] == [r.token_ids for r in want] == [r.token_ids for r in ar]
    assert [r.finish_reason for r in got] == [r.finish_reason for r in want]
    assert [r.stats.taus for r in got] == [r.stats.taus for r in want]  # same drafts: the same algorithm
    assert any(t > 1 for r in got for t in r.stats.taus)


@pytest.mark.parametrize("verify_len", [2, 5])
def test_device_loop_smaller_verify_len(engines, verify_len):
    host, dev = engines("host"), engines("device", 4)
    params = SamplingParams(max_new_tokens=40)
    want = host.generate(PROMPTS[:3], params, verify_len=verify_len)
    got = dev.generate(PROMPTS[:3], params, verify_len=verify_len)
    assert [r.token_ids for r in got] == [r.token_ids for r in want]
    assert all(1 <= t <= verify_len for r in got for t in r.stats.taus)


def test_device_loop_ar_mode(engines):
    host, dev = engines("host"), engines("device", 5)
    params = SamplingParams(max_new_tokens=30, temperature=1.0, seed=5)
    assert [r.token_ids for r in dev.generate(PROMPTS[:5], params, use_drafter=False)] == \
           [r.token_ids for r in host.generate(PROMPTS[:5], params, use_drafter=False)]


def test_abort_and_join_between_windows(engines):
    dev = engines("device", 2)
    sched = dev.new_scheduler()
    assert sched.steps_per_sync == 2
    params = SamplingParams(max_new_tokens=64, ignore_eos=True)
    for i in range(3):
        sched.add(i, PROMPTS[i], params)
    first = sched.step()  # prefill (3 first tokens) + one window
    assert {e.index for e in first} == {0, 1, 2}
    assert sched.abort(1) and sched.num_active == 2
    sched.add(9, PROMPTS[5], params)  # takes the freed slot at the next step
    outputs: dict = {}
    while sched.has_work:
        for e in sched.step():
            outputs.setdefault(e.index, []).extend(e.token_ids)
    alone = dev.generate([PROMPTS[5]], params)[0]
    assert outputs[9] == alone.token_ids  # joining a running batch changes nothing
    assert set(outputs) == {0, 2, 9}


def test_device_loop_config_errors(engines):
    with pytest.raises(ConfigError, match="decode_loop must be"):
        TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", decode_loop="gpu")
    with pytest.raises(ConfigError, match="steps_per_sync must be an integer >= 1"):
        engines("device", 0)
    with pytest.raises(ConfigError, match=r"steps_per_sync must be an integer in 1\.\.3"):
        engines("device", 3).new_scheduler(steps_per_sync=4)  # windows longer than the step's buffers
    with pytest.raises(ConfigError, match=r"room for 64 AR steps\): use --steps-per-sync 64 or less"):
        TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", decode_loop="device",
                                    steps_per_sync=65)  # an AR window's context rows would not fit


def test_one_step_object_and_fixed_stop_buffer(engines):
    """One SpecStep per engine, made once: a scheduler or generate() call reuses it (its buffers and graph cache); the
    stop-id buffer has a fixed width and a request over it is refused by name."""
    e = engines("device", 2)
    step = e.step_runner
    stop_buffer = step.stop_ids
    e.generate(PROMPTS[:2], SamplingParams(max_new_tokens=8, stop_token_ids=tuple(range(2, 2 + MAX_STOP_IDS - 1))))
    e.new_scheduler()
    assert e.step_runner is step and step.stop_ids is stop_buffer and stop_buffer.shape[1] == MAX_STOP_IDS
    with pytest.raises(RequestError, match=f"more than the {MAX_STOP_IDS}"):
        e.generate(PROMPTS[:1], SamplingParams(max_new_tokens=8, stop_token_ids=tuple(range(2, 3 + MAX_STOP_IDS))))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_graph_loop_matches_ar_on_gpu(dtype):
    """On a GPU with the plugin library: the captured-graph loop (kernels, no host sync inside a window) gives the
    target's own greedy tokens; graphs really replay."""
    require_gpu_plugins()
    make = dict(device="cuda", dtype=dtype, max_batch_size=4, max_seq_len=512)
    host = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", **make)
    dev = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", decode_loop="device", steps_per_sync=4, **make)
    params = SamplingParams(max_new_tokens=64)
    ar = host.generate(PROMPTS, params, use_drafter=False)
    assert dev.step_runner.cuda_graphs and dev.step_runner.ops.name == "cuda"
    got = dev.generate(PROMPTS, params)
    assert dev.step_runner.graph_replays > 0
    if dtype == "float32":
        assert [r.token_ids for r in got] == [r.token_ids for r in ar]
    else:  # bf16: a K-token verify rounds unlike K one-token steps, so the two may part where the target's top two
        # logits are within rounding of a tie (README "Numerics"), and only there
        from test_spec_lossless import _tokens_equal_until_a_near_tie

        compared = _tokens_equal_until_a_near_tie(host, [a.prompt_token_ids for a in ar], ar, got)
        assert compared >= len(PROMPTS) * 64 // 2
    sampled = SamplingParams(max_new_tokens=32, temperature=0.7, seed=1)
    if dtype == "float32":
        assert [r.token_ids for r in dev.generate(PROMPTS, sampled)] == \
               [r.token_ids for r in host.generate(PROMPTS, sampled, use_drafter=False)]


def test_default_decode_loop_is_host_on_cpu(engines):
    """decode_loop "auto" (the default) is the host loop where no CUDA graphs run (CPU); on a GPU with the plugin
    kernels it is the device loop (test_default_loop_on_gpu_is_lossless_for_every_draft)."""
    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=2,
                                         max_seq_len=128)
    assert engine.decode_loop == "host" and engine.steps_per_sync == 1 and not engine.step_runner.cuda_graphs
    assert engines("device", 3).decode_loop == "device"


@pytest.mark.gpu
def test_default_loop_on_gpu_is_lossless_for_every_draft():
    """On a GPU with the plugin library the default decode loop is the device loop (CUDA graphs, the kernels); every
    draft budget through it (chains, trees, auto) gives the host loop's AR tokens and finish reasons, greedy and
    sampled with the same seeds, 7 prompts through 4 slots (joins, stops and budgets inside windows)."""
    require_gpu_plugins()
    make = dict(device="cuda", dtype="float32", max_batch_size=4, max_seq_len=512)
    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", **make)
    host = TorchEngine.from_pretrained(PAIR / "target", None, decode_loop="host", **make)
    assert engine.decode_loop == "device" and engine.step_runner.cuda_graphs and engine.step_runner.ops.name == "cuda"
    failures = []
    for params in (SamplingParams(max_new_tokens=40), SamplingParams(max_new_tokens=23, temperature=0.8, top_k=40,
                                                                     top_p=0.9, seed=11)):
        ar = host.generate(PROMPTS, params)
        for draft in (None, "chain:4", "chain:16", "tree:16", "tree:32", "auto"):
            got = engine.generate(PROMPTS, params, **({"use_drafter": False} if draft is None else {"draft": draft}))
            if [r.token_ids for r in got] != [r.token_ids for r in ar] or \
                    [r.finish_reason for r in got] != [r.finish_reason for r in ar]:
                failures.append((draft or "ar", params.temperature))
            if draft in ("chain:16", "tree:16"):
                assert any(t > 1 for r in got for t in r.stats.taus), draft
    assert not failures, f"differs from the host loop's AR: {failures}"
    assert engine.step_runner.graph_replays > 0
    # graphs are captured for two context widths per draft: the block's, or all the rows (after an AR stretch); 0 for
    # a deferring or plain AR step, which reads none
    step = engine.step_runner
    for k, spec, tree, *_, width, defer in step.graphs:
        assert width in ((0,) if defer or not spec else (max(k, step.block_size), step.context_rows)), (k, tree, width)


@pytest.mark.gpu
def test_cost_table_on_gpu_times_the_replayed_step():
    """With CUDA graphs the draft budget's cost table times the step the device loop's windows replay (captured once
    per shape): on a small model a replayed step costs less than the eager one, whose kernel launches dominate; the
    timing graphs are freed afterwards and the engine still gives AR's tokens."""
    require_gpu_plugins()
    make = dict(device="cuda", dtype="float32", max_batch_size=4, max_seq_len=512)
    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", **make)
    step = engine.step_runner
    graphed = [step.time_step(1, 1, spec=False), step.time_step(4, 16, tree=True), step.time_step(2, 8)]
    assert not step._timing_graphs
    step.cuda_graphs = False
    eager = [step.time_step(1, 1, spec=False), step.time_step(4, 16, tree=True), step.time_step(2, 8)]
    step.cuda_graphs = True
    assert all(g < e for g, e in zip(graphed, eager)), (graphed, eager)
    params = SamplingParams(max_new_tokens=32)
    host = TorchEngine.from_pretrained(PAIR / "target", None, decode_loop="host", **make)
    assert [r.token_ids for r in engine.generate(PROMPTS, params, draft="auto")] == \
           [r.token_ids for r in host.generate(PROMPTS, params)]


@pytest.mark.gpu
@pytest.mark.parametrize("draft", [None, "tree:32", "auto"])
def test_graphs_captured_at_start_leave_none_to_capture(draft):
    """A scheduler's capture_graphs (what a server runs at start) captures every step shape its windows may meet: a
    workload afterwards (joins, every batch bucket, lengths up to max_seq_len, auto's drafts and both context widths)
    captures nothing more, and still gives AR's tokens."""
    require_gpu_plugins()
    make = dict(device="cuda", dtype="float32", max_batch_size=4, max_seq_len=256)
    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", **make)
    host = TorchEngine.from_pretrained(PAIR / "target", None, decode_loop="host", **make)
    kwargs = {"use_drafter": False} if draft is None else {"draft": draft}
    sched = engine.new_scheduler(**kwargs)
    count, _ = sched.capture_graphs()
    step = engine.step_runner
    assert count == len(step.graphs) > 0 and step.capture_s == 0
    assert sched.capture_graphs()[0] == 0  # captured already
    params = [SamplingParams(max_new_tokens=n, ignore_eos=True) for n in (150, 40, 9, 100, 60, 3, 100)]  # to ~244
    got = engine.generate(PROMPTS, params, **kwargs)
    assert [r.token_ids for r in got] == [r.token_ids for r in host.generate(PROMPTS, params)]
    assert len(step.graphs) == count and step.capture_s == 0, "a window captured a shape capture_graphs did not"


def test_wide_context_window_near_max_seq_len():
    """A drafting window whose context width is all the rows (a slot joined a batch held at AR: its pending rows) with
    another slot near max_seq_len: that slot's padding rows lie past the drafter cache's capacity and must not be
    written or rotated there (they are masked; IndexError here before the fix, a device assert on a GPU)."""
    from dflash_trt.spec.step import SlotRequest

    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=2,
                                         max_seq_len=256)
    step = engine.step_runner
    ids = engine.tokenizer.encode(" ".join(QUESTIONS[:12]))
    req = lambda slot, n: SlotRequest(slot, ids[:n], 0.0, 0, 1.0, 0, [], 256 - n)  # noqa: E731
    first, _ = step.prefill([req(0, 240)], spec=True)
    step.prefill([req(1, 100)], spec=True, defer_context=True)  # context_kept rows pending
    for _ in range(20):
        step.read(step.launch([1], 1, True, 1))  # deferring AR steps: more rows pending
    assert step.host_context[1] > step.target_cache.capacity - 240
    out = step.read(step.launch([0, 1], 4, True, 1))  # a drafting window: all the rows wide
    got = first + out.new_tokens[0]
    ar = TorchEngine.from_pretrained(PAIR / "target", None, device="cpu", max_batch_size=1, max_seq_len=256)
    assert got == ar.generate([ids[:240]], SamplingParams(max_new_tokens=len(got)))[0].token_ids


def test_capture_states_are_valid_steps(engines):
    """Every shape capture_graphs would capture (CPU: its states, run eagerly — a capture runs each once before
    recording it): the slots' caches hold a length whose window reaches the shape's attention length without passing
    it, the drafter's context starts at a position >= 0, and the step runs; the slots are free again afterwards. Per
    (draft, bucket) the attention lengths are those windows of that draft can have, up to the cache's capacity."""
    engine = engines("device", 3)
    step = engine.step_runner
    drafts = engine.new_scheduler(draft="auto").budget.drafts
    capacity, seen = step.target_cache.capacity, {}
    for rows, k, spec, tree, upto, key in step._capture_states(drafts, True):
        lengths = step.target_cache.lengths[rows]
        assert (lengths >= 1).all() and (lengths + k <= upto).all(), (k, tree, upto, lengths)
        if spec:
            assert (step.drafter_cache.lengths[rows] >= 0).all(), (k, tree, upto)
        with torch.inference_mode():
            step._step_fn(rows, k, spec, upto, True, tree)
        seen.setdefault((k, tree, rows.shape[0]), set()).add(upto)
        assert key[:5] == (k, spec, tree, rows.shape[0], upto)
    assert step.done.all() and (step.target_cache.lengths == 0).all()
    assert {d.size for d in drafts} == {k for k, _, _ in seen} and all(max(u) == capacity for u in seen.values())
    assert seen[(32, True, 1)] == {64, 128, 256, 512, capacity} and seen[(1, False, 4)] == {64, 128, 256, 512, capacity}


def test_capture_graphs_is_for_an_idle_scheduler(engines):
    """Without CUDA graphs capture_graphs captures nothing; with a request added it refuses (the slots must be free)."""
    engine = engines("host", 1)
    sched = engine.new_scheduler(draft="auto")
    assert sched.capture_graphs()[0] == 0 and not engine.step_runner.graphs
    sched.add("a", PROMPTS[0], SamplingParams(max_new_tokens=4))
    with pytest.raises(RequestError, match="before any request"):
        sched.capture_graphs()


def _pipelined(engine, **kwargs):
    """A scheduler with the pipeline on (the next window launched with its first step before the current one's read;
    on by default with CUDA graphs only) and its budget's GPU bookkeeping (every window's observations taken in while
    the device runs, a batch's last ones handed over): forced here on CPU, where launch runs the steps at once."""
    sched = engine.new_scheduler(**kwargs)
    assert not sched._pipeline  # CPU: no CUDA graphs
    sched._pipeline = True
    sched._overlap = sched.spec
    return sched


def _drain(sched, launched_ahead: list, outputs: dict | None = None) -> dict:
    outputs = {} if outputs is None else outputs
    while sched.has_work:
        for e in sched.step():
            outputs.setdefault(e.index, []).extend(e.token_ids)
            if e.finished:
                assert e.result.token_ids == outputs[e.index]
        launched_ahead.append(sched._ahead is not None)
    return outputs


@pytest.mark.parametrize("draft", [None, "chain:4", "tree:16", "auto"])
@pytest.mark.parametrize("params", [SamplingParams(max_new_tokens=40),
                                    SamplingParams(max_new_tokens=23, temperature=0.8, top_k=40, top_p=0.9, seed=11)],
                         ids=["greedy", "sampled"])
def test_pipelined_windows_are_lossless(engines, draft, params):
    """Windows launched ahead (their first step before the previous window's read, the rest after) give AR's tokens,
    greedy and sampled: 7 prompts through 4 slots (joins end a window launched ahead early), EOS and budgets inside
    windows; nothing is left in flight."""
    engine = engines("device", 3)
    ar = engine.generate(PROMPTS, params, use_drafter=False)
    sched = _pipelined(engine, **({"use_drafter": False} if draft is None else {"draft": draft}))
    for i, p in enumerate(PROMPTS):
        sched.add(i, p, params)
    ahead: list = []
    outputs = _drain(sched, ahead)
    assert [outputs[i] for i in range(len(PROMPTS))] == [r.token_ids for r in ar]
    assert sum(ahead) >= 3  # windows were launched ahead
    assert not engine.step_runner._in_flight


def test_pipelined_plain_ar_windows(engines):
    """Plain AR windows (no taps: a held batch far from its probe) launched ahead between deferring and drafting
    ones, the drafter's context restarted behind unread windows: AR's tokens, 7 prompts through 4 slots."""
    engine = engines("device", 3)
    params = SamplingParams(max_new_tokens=60, ignore_eos=True)
    ar = engine.generate(PROMPTS, params, use_drafter=False)
    sched = _pipelined(engine, draft="chain:16")
    sched.budget = Scripted(["ar", "ar", 4, "ar", 1, Draft("tree", 16), "ar", 16])
    step, exact = engine.step_runner, []
    read = step.read

    def checked(launched):  # with nothing else in flight the host's pending counts are the device's
        out = read(launched)
        if not step._in_flight:
            live = [s for s, d in zip(launched.slots, out.done) if not d]
            exact.append([step.host_context[s] for s in live] == step.context_counts[live].tolist())
        return out

    step.read = checked
    for i, p in enumerate(PROMPTS):
        sched.add(i, p, params)
    ahead: list = []
    outputs = _drain(sched, ahead)
    assert [outputs[i] for i in range(len(PROMPTS))] == [r.token_ids for r in ar]
    assert sum(ahead) >= 3 and "ar" in sched.budget.seen and not engine.step_runner._in_flight
    assert len(exact) >= 3 and all(exact)
    assert int(engine.step_runner.context_from.max()) > 0  # the drafter's context restarted after plain windows


def test_retap_behind_an_unread_plain_window(engines):
    """A deferring window launched behind an unread plain AR window restarts the drafter's context (_retap): once
    both are read the host's pending counts are the device's (the plain window's read leaves them alone), and a
    drafting window after them gives AR's tokens."""
    from dflash_trt.spec.step import SlotRequest

    engine = engines("device", 3)
    step = engine.step_runner
    ids = [engine.tokenizer.encode(p) for p in PROMPTS[:2]]
    first, _ = step.prefill([SlotRequest(i, ids[i], 0.0, 0, 1.0, 0, [], 40) for i in range(2)], spec=True)
    plain = step.launch([0, 1], 1, False, 3)
    deferring = step.launch([0, 1], 1, True, 3, run=1)
    assert step._in_flight == [plain, deferring]
    outs = [step.read(plain)]
    step.resume(deferring)
    outs.append(step.read(deferring))
    assert [step.host_context[s] for s in (0, 1)] == step.context_counts[:2].tolist() == [3, 3]
    outs.append(step.read(step.launch([0, 1], 4, True, 3)))
    ar = engine.generate(PROMPTS[:2], SamplingParams(max_new_tokens=40), use_drafter=False)
    for i in range(2):
        got = [first[i]] + [t for o in outs for t in o.new_tokens[i]]
        assert got == ar[i].token_ids[: len(got)]


def test_pipelined_abort_and_join(engines):
    """A request aborted while a window launched ahead holds it, and one joining into its slot: the others are
    unchanged, the new one equals its output alone."""
    engine = engines("device", 2)
    params = SamplingParams(max_new_tokens=64, ignore_eos=True)
    sched = _pipelined(engine, draft="chain:4")
    for i in range(3):
        sched.add(i, PROMPTS[i], params)
    outputs: dict = {}
    for _ in range(3):
        for e in sched.step():
            outputs.setdefault(e.index, []).extend(e.token_ids)
    assert sched._ahead is not None and sched.slot_of(1) in sched._ahead.launched.slots
    assert sched.abort(1)
    sched.add(9, PROMPTS[5], params)  # takes slot 1's place: the window launched ahead ends first
    for e in sched.step():
        outputs.setdefault(e.index, []).extend(e.token_ids)
    _drain(sched, [], outputs)
    alone = {i: engine.generate([PROMPTS[i]], params, draft="chain:4")[0].token_ids for i in (0, 2, 5)}
    assert outputs[0] == alone[0] and outputs[2] == alone[2] and outputs[9] == alone[5]
    assert set(outputs) == {0, 1, 2, 9} and not engine.step_runner._in_flight


def test_window_launched_ahead_runs_in_two_parts(engines):
    """SpecStep: a window launched with run=1 and resumed equals the same window launched whole; one resumed to
    fewer steps ends early; a window not fully queued cannot be read; a deferring (AR) window whose slots might have
    to cut their pending context rows cannot be launched while an earlier window is unread."""
    engine = engines("device", 3)
    runner = engine.step_runner
    params = SamplingParams(max_new_tokens=30, ignore_eos=True)
    results = []
    for parts in ((3,), (1, 3), (1, 2)):
        sched = engine.new_scheduler(draft="chain:4")
        sched.add(0, PROMPTS[0], params)
        sched.add(1, PROMPTS[1], params)
        sched.step()  # prefill + one window
        slots = [sched.slot_of(0), sched.slot_of(1)]
        launched = runner.launch(slots, 4, True, 3, run=parts[0])
        if len(parts) > 1:
            with pytest.raises(ValueError, match="resume it first"):
                runner.read(launched)
            runner.resume(launched, parts[1])
        results.append(runner.read(launched))
    assert results[1].new_tokens == results[0].new_tokens and results[1].taus == results[0].taus
    assert [len(t) for t in results[2].taus] == [2, 2]
    assert all(results[0].new_tokens[i][: len(n)] == n for i, n in enumerate(results[2].new_tokens))
    assert runner.ahead_ok(slots, 1, True, False, 3)  # nothing unread
    runner.host_context[slots[0]] = runner.context_rows - 5  # (host side only: this engine is dropped after)
    first = runner.launch(slots, 1, True, 3)  # deferring: up to 3 more pending rows, so up to context_rows - 2
    assert not runner.ahead_ok(slots, 1, True, False, 3) and runner.ahead_ok(slots, 4, True, False, 3)
    with pytest.raises(ValueError, match="read that window first"):
        runner.launch(slots, 1, True, 3, run=1)
    runner.discard(first)
    assert not runner._in_flight
    # behind an unread drafting window (which takes the pending rows in), a deferring one cuts nothing, however many
    # rows the host last saw pending
    cuts = []
    drop = runner._drop_context
    runner._drop_context = lambda s: (cuts.append(list(s)), drop(s))
    runner.launch(slots, 4, True, 3)  # drafting, unread
    runner.launch(slots, 1, True, 3, run=1)  # deferring, launched ahead
    assert cuts == [[]] and runner._context_bound(slots[0]) == 4 + 3
