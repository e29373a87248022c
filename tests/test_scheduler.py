"""In-flight batching (engines/scheduler.py): requests that join a running batch, leave it, or are aborted get exactly
the tokens they get alone; freed slots are reused; bad requests are refused at `add` without touching the batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_trt import RequestError, SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine

PAIR = Path(__file__).resolve().parent / "fixtures" / "gsm8k-tiny"
PROMPTS = [
    "Question: Tom has 3 apples and buys 5 more. How many apples does he have?\nAnswer:",
    "Question: A train travels 60 miles per hour for 2 hours. How far does it go?\nAnswer:",
    "Question: Sara had 20 dollars and spent 7. How much is left?\nAnswer:",
    "Question: There are 4 boxes with 6 pens each. How many pens are there?\nAnswer:",
    "Question: Mike reads 12 pages a day. How many pages does he read in a week?\nAnswer:",
]
PARAMS = [SamplingParams(max_new_tokens=n, ignore_eos=True) for n in (24, 40, 16, 32, 20)]
PARAMS[2] = SamplingParams(max_new_tokens=16, temperature=0.8, top_p=0.9, seed=7, ignore_eos=True)  # a sampled one


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def engine():
    return TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=3, max_seq_len=256)


@pytest.fixture(scope="module")
def alone(engine):
    return [engine.generate([p], q)[0].token_ids for p, q in zip(PROMPTS, PARAMS)]


def _drain(sched, outputs, events=None):
    while sched.has_work:
        for e in sched.step():
            outputs.setdefault(e.index, []).extend(e.token_ids)
            if events is not None:
                events.append(e)


def test_joining_mid_run_matches_running_alone(engine, alone):
    sched = engine.new_scheduler()
    out: dict = {}
    sched.add("a", PROMPTS[0], PARAMS[0])
    sched.add("b", PROMPTS[1], PARAMS[1])
    for _ in range(3):  # a and b are mid-generation when the others arrive
        for e in sched.step():
            out.setdefault(e.index, []).extend(e.token_ids)
    assert sched.num_active == 2 and all(len(out[r]) > 1 for r in "ab")
    sched.add("c", PROMPTS[2], PARAMS[2])
    sched.add("d", PROMPTS[3], PARAMS[3])
    sched.add("e", PROMPTS[4], PARAMS[4])
    sizes, waited = [], False
    events = []
    while sched.has_work:
        waited |= sched.num_waiting > 0 and sched.num_active == 3
        for e in sched.step():
            out.setdefault(e.index, []).extend(e.token_ids)
            events.append(e)
        sizes.append(sched.last_batch_size)
    assert waited  # the batch was full and the last request waited for a freed slot
    assert max(sizes) == 3 and sched.max_active == 3
    for rid, want in zip("abcde", alone):
        assert out[rid] == want, f"request {rid} differs from its solo run"
    finals = {e.index: e for e in events if e.finished}
    assert set(finals) == set("abcde")
    assert all(finals[r].result.token_ids == out[r] for r in "abcde")
    assert all(finals[r].finish_reason == "length" for r in "abcde")
    assert sum(len(finals[r].result.stats.taus) for r in "abcde") > 0


def test_abort_frees_the_slot_for_the_next_request(engine, alone):
    sched = engine.new_scheduler()
    long = SamplingParams(max_new_tokens=200, ignore_eos=True)
    sched.add("long", PROMPTS[0], long)
    sched.add("b", PROMPTS[1], PARAMS[1])
    out: dict = {}
    for e in sched.step():
        out.setdefault(e.index, []).extend(e.token_ids)
    slot = sched.slot_of("long")
    assert slot == 0 and sched.num_active == 2
    assert sched.abort("long") is True
    assert sched.num_active == 1 and "long" not in sched and sched.slot_of("long") is None
    assert sched.abort("long") is False  # unknown now
    sched.add("waiting", PROMPTS[3], PARAMS[3])
    assert sched.abort("waiting") is True and sched.num_waiting == 0  # a queued request can be dropped too
    sched.add("c", PROMPTS[2], PARAMS[2])
    for e in sched.step():
        out.setdefault(e.index, []).extend(e.token_ids)
    assert sched.slot_of("c") == slot  # the aborted request's slot, reused
    _drain(sched, out)
    assert out["b"] == alone[1] and out["c"] == alone[2]
    assert 1 < len(out["long"]) < 200  # it stopped when aborted


def test_continuous_batching_in_generate(engine, alone):
    """More prompts than max_batch_size: freed slots take the next prompt; same outputs as one at a time."""
    results = engine.generate(PROMPTS, PARAMS)
    assert [r.token_ids for r in results] == alone
    streamed: dict = {}
    for e in engine.stream(PROMPTS, PARAMS):
        streamed.setdefault(e.index, []).extend(e.token_ids)
    assert [streamed[i] for i in range(len(PROMPTS))] == alone


def test_add_validates_like_generate(engine):
    sched = engine.new_scheduler()
    with pytest.raises(RequestError, match="prompt is empty"):
        sched.add(1, "", SamplingParams())
    with pytest.raises(RequestError, match="max_seq_len 256"):
        sched.add(2, [5] * 250, SamplingParams(max_new_tokens=10))
    with pytest.raises(RequestError, match="temperature"):
        sched.add(3, "hi", SamplingParams(temperature=float("nan")))
    with pytest.raises(RequestError, match="top_p"):
        sched.add(4, "hi", SamplingParams(top_p=1.5))
    with pytest.raises(RequestError, match="max_new_tokens"):
        sched.add(5, "hi", SamplingParams(max_new_tokens=0))
    sched.add(6, "hi", SamplingParams(max_new_tokens=2))
    with pytest.raises(RequestError, match="already in use"):
        sched.add(6, "hi", SamplingParams(max_new_tokens=2))
    assert sched.num_waiting == 1 and sched.num_active == 0  # only the valid request was queued
    out: dict = {}
    _drain(sched, out)
    assert len(out[6]) == 2


def test_a_windows_cost_counts_the_callers_work_until_the_next_window_not_prefills_or_idle(engine, monkeypatch):
    """The draft budget learns a window's cost as its own time plus the caller's until the next window (delivering
    events costs an AR window per token, a drafted one per several), capped at the window's own time; a prefill in
    between is not the window's, and a window that ends the batch is observed alone."""
    import time

    seen, windows = [], []
    sched = engine.new_scheduler(draft="chain:4")
    sched.budget.observe_time = lambda n, draft, seconds, length: seen.append(seconds)
    choose = sched.budget.choose
    sched.budget.choose = lambda requests, left, length: windows.append(len(requests)) or choose(requests, left, length)
    sched.add("a", PROMPTS[0], SamplingParams(max_new_tokens=16, ignore_eos=True))
    sched.step()  # prefill + the first window
    w1 = sched.decode_s
    assert seen == []  # held until the next window: the caller's work counts
    time.sleep(w1 / 2)  # the caller's work between windows
    sched.step()
    w2 = sched.decode_s - w1
    # the window's own time and the caller's sleep at least (the scheduler's own work between them on top: more where
    # another process shares the CPU), and never past the cap
    assert len(seen) == 1 and w1 * 1.5 * 0.97 <= seen[0] <= w1 * 2 + 1e-9, (seen[0], w1)
    time.sleep(10 * w2)  # a slow (or idle) caller counts at most the window's own time again
    sched.step()
    w3 = sched.decode_s - w1 - w2
    assert len(seen) == 2 and w2 * 1.9 <= seen[1] <= w2 * 2 + 1e-9
    prefill = sched.runner.prefill

    def slow_prefill(*args, **kwargs):
        time.sleep(3 * w3)
        return prefill(*args, **kwargs)

    monkeypatch.setattr(sched.runner, "prefill", slow_prefill)
    sched.add("b", PROMPTS[1], SamplingParams(max_new_tokens=4, ignore_eos=True))  # a prefill before the next window
    sched.step()
    assert len(seen) == 3 and seen[2] < 1.8 * w3  # counted, the prefill's sleep would have taken it to the cap, 2 * w3
    while sched.has_work:
        sched.step()
    assert len(seen) == len(windows)  # every window observed once, the one that ended the batch too
