"""scripts/sim_draft_budget.py replays draft policies over acceptance traces measured once per position. Its claim
is exactness: at greedy, a replayed fixed draft reports the very τ sequence the engine reports running it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from dflash_trt import SamplingParams
from dflash_trt.bench.datasets import encode_prompt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft, Fixed, auto_drafts

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "gsm8k-tiny"


def _sim():
    spec = importlib.util.spec_from_file_location("sim_draft_budget", ROOT / "scripts" / "sim_draft_budget.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def setup():
    engine = TorchEngine.from_pretrained(FIXTURE / "target", FIXTURE / "drafter", device="cpu", max_batch_size=4,
                                         max_seq_len=256)
    lines = (ROOT / "data" / "prompts" / "eagle_gsm8k.jsonl").read_text().splitlines()[:4]
    prompts = [encode_prompt(engine.tokenizer, json.loads(line)["turns"][0], 160)[0] for line in lines]
    sim = _sim()
    return engine, prompts, sim, sim.acceptance_traces(engine, prompts, 40)


@pytest.mark.parametrize("draft", ["chain:4", "chain:16", "tree:16"])
def test_replay_reports_the_engines_taus(setup, draft):
    engine, prompts, sim, traces = setup
    kind, size = draft.split(":")
    d = Draft(kind, int(size))
    for prompt, trace in zip(prompts, traces):
        real = engine.generate([prompt], SamplingParams(max_new_tokens=40), draft=draft)[0]
        walk = sim.Walk(0, trace, engine.drafter.block_size)
        while not walk.done:
            walk.step(d)
        assert walk.taus == real.stats.taus
        assert trace["tokens"] == len(real.token_ids)


def test_replayed_trees_show_auto_their_argmax_chain_as_the_engine_does(setup, monkeypatch):
    """A tree step's argmax chain (K, τ), what auto's chain estimate learns from trees (spec/tree.chain_equivalent),
    replays as the engine reports it — including the depth past the tree that the target's token judges — on every
    step but each request's last (its budget cuts the engine's accepted path there)."""
    engine, prompts, sim, traces = setup
    seen = []
    original = Fixed.observe_window

    def observe_window(self, requests, draft, taus, chain_equivalent=(), finished=()):
        seen.extend(step for steps in chain_equivalent for step in steps)
        return original(self, requests, draft, taus, chain_equivalent, finished)

    monkeypatch.setattr(Fixed, "observe_window", observe_window)
    past_the_tree = 0
    for prompt, trace in zip(prompts, traces):
        seen.clear()
        engine.generate([prompt], SamplingParams(max_new_tokens=40), draft="tree:16")
        walk = sim.Walk(0, trace, engine.drafter.block_size)
        replayed = []
        while not walk.done:
            depth = trace["trees"]["16"]["chain_depth"][walk.produced - 1]
            equiv = walk.step(Draft("tree", 16))[1]
            replayed.append(equiv)
            past_the_tree += equiv[0] - 1 > depth
        assert len(seen) == len(replayed) > 1
        assert seen[:-1] == replayed[:-1]
    assert past_the_tree > 0  # (the chain judged one depth past the tree on some steps)


def test_oracle_bounds_every_fixed_draft_and_auto_runs(setup):
    engine, _, sim, traces = setup
    block = engine.drafter.block_size
    drafts = auto_drafts(block, (16, 32))
    # AR 1, a chain costs 2 + K / 8, a tree 2.5 + N / 8 (arbitrary, fixed)
    costs = {(n, d): n * (1.0 if d.size == 1 else (2.5 if d.tree else 2.0) + d.size / 8) for n in (1, 2, 4)
             for d in drafts}
    table = CostTable(costs, refine=False)
    best_tokens, best_seconds = sim.oracle(traces, table.cost, drafts, block)
    for d in drafts:
        tokens, seconds, taus = sim.simulate(traces, 1, d, table.cost, block)
        assert tokens == best_tokens and best_seconds <= seconds + 1e-9
    tokens, seconds, taus = sim.simulate(traces, 4, AutoBudget(block, CostTable(dict(costs)), trees=(16, 32)),
                                         table.cost, block)
    assert tokens == best_tokens and seconds > 0 and all(1 <= t <= block for t in taus)


def test_continuous_arrivals_keep_every_requests_taus_and_fill_the_freed_slots(setup):
    """As a server at concurrency 3: a request's τ sequence under a fixed draft is its own (greedy), whoever shares its
    windows; the 4th request joins as soon as one of the first 3 finishes, so the run takes fewer windows than batches
    of 3 (the 4th alone after the longest of the first 3) do."""
    engine, _, sim, traces = setup
    block = engine.drafter.block_size
    d = Draft("chain", 8)
    windows = []

    def cost(n, draft):
        windows.append(n)
        return float(n)

    tokens_c, seconds_c, taus_c = sim.simulate(traces, 3, d, cost, block, continuous=True)
    count_c = len(windows)
    windows.clear()
    tokens_b, seconds_b, taus_b = sim.simulate(traces, 3, d, cost, block)
    assert tokens_c == tokens_b and sorted(taus_c) == sorted(taus_b)
    assert seconds_c == seconds_b  # the same steps, each costing its rows
    assert count_c < len(windows), (count_c, len(windows))  # a freed slot was refilled


def test_windows_of_several_steps_replay_the_same_steps_and_hand_over_a_window_late(setup):
    """steps=4 (the device loop's windows): a fixed draft's requests take the very steps they take in one-step
    windows (the same τs), while a window costs all its steps even when its requests finish inside it; auto's
    observations reach it a window late, as the scheduler hands them over (after the next window's choice)."""
    engine, _, sim, traces = setup
    block = engine.drafter.block_size
    d = Draft("chain", 8)
    one = sim.simulate(traces, 2, d, lambda n, draft: 1.0, block)
    four = sim.simulate(traces, 2, d, lambda n, draft: 1.0, block, steps=4)
    assert one[0] == four[0] and sorted(one[2]) == sorted(four[2])
    assert one[1] <= four[1] < one[1] + 2 * 3 * len(traces)  # at most 3 idle steps per batch's window end

    costs = {(n, dr): n * (1.0 if dr.size == 1 else 2.0 + dr.size / 8) for n in (1, 2) for dr in auto_drafts(block)}
    budget = AutoBudget(block, CostTable(dict(costs), refine=False))
    seen = []
    choose = budget.choose

    def spy(requests, left=None):
        seen.append(budget.curve.trials[0])
        return choose(requests, left)

    budget.choose = spy
    sim.simulate(traces, 1, budget, CostTable(costs, refine=False).cost, block, steps=4)
    assert seen[0] == 0 and seen[1] == 0  # the first window's steps are not seen by the second window's choice
    assert seen[2] > 0 and budget.curve.trials[0] > 0  # ... but by the third's


def test_the_machine_drift_walks_on_the_replays_clock(setup):
    """--machine-drift: the machine's speed is a walk over the replay's seconds, the same for every policy at a seed,
    not one step per window (which had walked a replay of many cheap windows further than one of few dear ones). Where
    every window costs twice as much, its windows meet the walk at twice the times: not just twice the seconds, as a
    walk per window gave; with no drift, exactly twice."""
    engine, _, sim, traces = setup
    block, ar = engine.drafter.block_size, Draft("chain", 1)

    def seconds(scale: float, drift: float) -> float:
        return sim.simulate(traces, 1, ar, lambda n, d: scale * 1e-3, block, drift=drift, seed=3)[1]

    assert seconds(2.0, 0.0) == pytest.approx(2 * seconds(1.0, 0.0))
    walked, doubled = seconds(1.0, 0.05), seconds(2.0, 0.05)
    assert doubled != pytest.approx(2 * walked, rel=1e-3)
    assert seconds(1.0, 0.05) == walked  # (seeded)
