"""The linear-attention (Gated DeltaNet) states of a hybrid target (Qwen3.5) under verify-and-crop
(models/linear_states.py), on the tiny random Qwen3.5 of test_families.py (hidden 64; layers linear, full, linear,
linear; 2 key heads / 4 value heads of 16, conv kernel 4), float32:

* after a ragged right-padded prefill and after verify blocks with every kind of crop (nothing kept, 1 token, part,
  all), with forwards of a subset of the slots in between and a slot re-used for a new sequence, each slot's conv and
  recurrent state equals the one transformers' own cache holds after running the committed tokens, and the logits of
  every block equal transformers' on the whole sequence;
* the replay's batching (one call per kept length, or binary pieces) re-runs each row's kept tokens exactly once, in
  order;
* a forward that fails half-way leaves the states as they were; dummy lengths (SpecStep.time_step's) leave nothing
  behind for the requests that follow;
* a Qwen3_5ForConditionalGeneration checkpoint tied by its top-level flag serves its text model with the tied head,
  and Qwen's multi-token-prediction tensors are skipped.

AR and DFlash generation = transformers' greedy generate, token for token, for Qwen3.5, Qwen3.5-MoE and Qwen3-Next:
test_families.py.
"""

from __future__ import annotations

import random

import pytest
import torch
from safetensors.torch import load_file

from dflash_trt import SamplingParams, tiny
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.models.hf_target import HfTarget
from dflash_trt.models.linear_states import _stages
from dflash_trt.models.target import load_target
from conftest import edit_safetensors
from test_families import MASK_ID, NEW_TOKENS, TAPS, VOCAB, close, hf_config, hf_greedy, make_target, prompts, reference

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LINEAR = [0, 2, 3]  # the linear-attention layers of test_families' "qwen3_5_causal"
_PAIR: dict = {}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    if not _PAIR:
        root = tmp_path_factory.mktemp("hybrid")
        target = make_target(root / "target", "qwen3_5_causal")
        drafter = tiny.make_drafter(root / "drafter", target, mask_token_id=MASK_ID, layers=1, block_size=16,
                                    target_layer_ids=TAPS)
        _PAIR.update(target=target, drafter=drafter)
    yield _PAIR["target"], _PAIR["drafter"]


def teardown_module(module):
    _PAIR.clear()


def test_replay_stages_run_each_kept_token_once():
    """Each row's pieces are contiguous from 0 and end at its kept length; never more calls than distinct lengths or
    binary digits of the longest."""
    rng = random.Random(0)
    for case in [[1], [15], [1, 2, 3, 4, 5, 6, 7], [7, 7, 7, 3], [5, 9, 13, 13, 2]] + [
            [rng.randint(1, 63) for _ in range(rng.randint(1, 12))] for _ in range(200)]:
        stages = _stages(case)
        covered = [0] * len(case)
        for rows, offsets, size in stages:
            for i, off in zip(rows, offsets):
                assert off == covered[i]
                covered[i] += size
        assert covered == case
        assert len(stages) <= min(len(set(case)), max(case).bit_length())


def _hf_states(hf, tokens: list[int]):
    """transformers' own cache after running `tokens` (one sequence, no padding): per linear layer (conv, recurrent)."""
    out = hf(torch.tensor([tokens]), use_cache=True)
    layers = out.past_key_values.layers
    return {i: (layers[i].conv_states[0][0], layers[i].recurrent_states[0][0]) for i in LINEAR}


def _check_states(target: HfTarget, cache, hf, slots: list[int], seqs: list[list[int]], msg: str) -> None:
    """Bring the slots' states to their committed lengths (what the next forward's begin does) and compare them with
    transformers' cache after the same tokens."""
    assert cache.lengths[slots].tolist() == [len(s) for s in seqs]
    linear = cache.linear
    linear.settle(slots, [len(s) for s in seqs])
    for slot, seq in zip(slots, seqs):
        want = _hf_states(hf, seq)
        for layer in LINEAR:
            live = int(linear.live[slot])
            close(linear.conv[layer][live, slot], want[layer][0], msg=f"{msg}: conv state, slot {slot}, layer {layer}")
            close(linear.recurrent[layer][live, slot], want[layer][1],
                  msg=f"{msg}: recurrent state, slot {slot}, layer {layer}")


@torch.inference_mode()
def test_states_and_logits_follow_every_crop(pair):
    target_dir, _ = pair
    target, hf = load_target(target_dir), reference(target_dir)
    assert sorted(target.linear_layers) == LINEAR and target.kv_shapes()[0] is None
    cache = target.new_cache(6, 96)
    slots = [5, 1, 3]
    seqs = prompts()  # 21, 9, 14 tokens: right-padded to 21 in one prefill
    ids = torch.zeros(3, 21, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    rows = torch.tensor(slots)
    target(ids, cache, rows, max_length=21, host_slots=slots)
    cache.set_lengths(rows, torch.tensor([len(s) for s in seqs]))
    _check_states(target, cache, hf, slots, seqs, "after the padded prefill")

    g = torch.Generator().manual_seed(11)
    t = 8
    # kept tokens per row and step (0: the row is frozen, its length not moved; 8: all kept); None: not in the forward
    schedule = [[8, 1, 0], [3, 8, 5], [1, None, 8], [0, 2, None], [6, 7, 1]]
    for step, kept in enumerate(schedule):
        active = [i for i, k in enumerate(kept) if k is not None]
        block = torch.randint(1, VOCAB - 1, (len(active), t), generator=g)
        act = [slots[i] for i in active]
        logits, _ = target(block, cache, torch.tensor(act), host_slots=act)
        for j, i in enumerate(active):
            full = seqs[i] + block[j].tolist()
            close(logits[j], hf(torch.tensor([full]), use_cache=False).logits[0, len(seqs[i]):],
                  msg=f"step {step}: logits of row {i}")
            seqs[i] = seqs[i] + block[j, : kept[i]].tolist()
        cache.set_lengths(torch.tensor(act), torch.tensor([len(seqs[i]) for i in active]))
        if step % 2:  # settle now and compare; otherwise the next forward settles (rows left out keep theirs)
            _check_states(target, cache, hf, act, [seqs[i] for i in active], f"step {step}")
    _check_states(target, cache, hf, slots, seqs, "after the last step")

    # slot 1: a block verified (its window pending), then the slot is re-used for a new sequence before any commit;
    # slot 5's window stays pending meanwhile
    block = torch.randint(1, VOCAB - 1, (2, t), generator=g)
    target(block, cache, torch.tensor([1, 5]), host_slots=[1, 5])
    cache.set_lengths(torch.tensor([1]), torch.tensor([0]))
    fresh = torch.randint(1, VOCAB - 1, (1, 5), generator=g)
    logits, _ = target(fresh, cache, torch.tensor([1]), host_slots=[1])
    close(logits[0], hf(fresh, use_cache=False).logits[0], msg="a re-used slot")
    cache.set_lengths(torch.tensor([1, 5]), torch.tensor([5, len(seqs[0]) + 2]))
    seqs[1], seqs[0] = fresh[0].tolist(), seqs[0] + block[1, :2].tolist()
    _check_states(target, cache, hf, [1, 5], [seqs[1], seqs[0]], "a re-used slot and a long-pending one")


@pytest.mark.parametrize("where", ["replay", "forward"])
@torch.inference_mode()
def test_failed_forward_leaves_the_states(pair, where):
    """A forward that raises in its third layer changes nothing: either while the rows' states are brought to their
    committed lengths (the replay of a crop, after the first linear layer's state was re-run) or in the forward proper
    (after the first linear layer wrote its new state). The same forward again, and a crop after it, give
    transformers' results."""
    target_dir, _ = pair
    target, hf = load_target(target_dir), reference(target_dir)
    cache = target.new_cache(2, 64)
    seq = prompts()[1]
    target(torch.tensor([seq]), cache, torch.tensor([1]), host_slots=[1])
    cache.set_lengths(torch.tensor([1]), torch.tensor([len(seq) - 2]))  # a crop: replayed at the next forward
    block = torch.randint(1, VOCAB - 1, (1, 6), generator=torch.Generator().manual_seed(2))

    def boom(module, args, kwargs):
        if (kwargs.get("cache", kwargs.get("cache_params")) is cache) == (where == "forward"):
            raise RuntimeError("injected")

    handle = target.linear_layers[2].register_forward_pre_hook(boom, with_kwargs=True)
    with pytest.raises(RuntimeError, match="injected"):
        target(block, cache, torch.tensor([1]), host_slots=[1])
    handle.remove()
    logits, _ = target(block, cache, torch.tensor([1]), host_slots=[1])
    full = seq[:-2] + block[0].tolist()
    close(logits[0], hf(torch.tensor([full]), use_cache=False).logits[0, len(seq) - 2:], msg="after a failed forward")
    cache.set_lengths(torch.tensor([1]), torch.tensor([len(seq) + 1]))
    _check_states(target, cache, hf, [1], [full[: len(seq) + 1]], "crop after a failed forward")


def test_timed_dummy_steps_then_generation_equals_transformers(pair):
    """SpecStep.time_step (the auto draft budget's cost table) runs steps at dummy lengths in free slots; the requests
    that then take those slots generate exactly what transformers' greedy generate does (AR and DFlash)."""
    target_dir, drafter_dir = pair
    seqs = prompts()
    want = hf_greedy(target_dir, seqs, NEW_TOKENS)
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=4,
                                         max_seq_len=128)
    for k in (1, 8):
        assert engine.step_runner.time_step(4, k, spec=True, length=50, repeats=1) > 0
    params = SamplingParams(max_new_tokens=NEW_TOKENS, ignore_eos=True)
    assert [r.token_ids for r in engine.generate(seqs, params, verify_len=8)] == want
    assert [r.token_ids for r in engine.generate(seqs, params, use_drafter=False)] == want


@torch.inference_mode()
def test_multimodal_checkpoint_tied_head_and_mtp_tensors(pair, tmp_path):
    """A Qwen3_5ForConditionalGeneration checkpoint whose LM head is tied by its top-level flag (no lm_head tensor)
    serves its text model with the tied head, as transformers' multimodal class does; Qwen's multi-token-prediction
    tensors (mtp.*, unused) are skipped, not refused."""
    cfg = hf_config("qwen3_5")
    cfg.tie_word_embeddings = True
    target_dir = tiny.make_hf_target(tmp_path / "tied", cfg)
    assert "lm_head.weight" not in load_file(str(target_dir / "model.safetensors"))
    edit_safetensors(target_dir, lambda t: t.update({"mtp.fc.weight": torch.zeros(4, 4)}))
    target = load_target(target_dir)
    assert target.cfg.text_of_multimodal and target.cfg.tie_word_embeddings
    assert torch.equal(target.hf.lm_head.weight, target.hf.model.embed_tokens.weight)
    hf = reference(target_dir)
    ids = torch.tensor([prompts()[0]])
    logits, _ = target(ids, target.new_cache(1, 32), torch.tensor([0]))
    close(logits[0], hf(ids, use_cache=False).logits[0], msg="tied multimodal checkpoint")


def test_memory_check_counts_the_states(pair, monkeypatch):
    """The per-slot states are what LinearStates allocates, and the engine's memory check counts them."""
    target = load_target(pair[0])
    cache = target.new_cache(3, 32)
    linear = cache.linear
    allocated = sum(t.numel() * t.element_size() for d in (linear.conv, linear.recurrent) for t in d.values())
    assert target.state_bytes_per_slot() == allocated // 3 > 0
    import dflash_trt.engines.torch_engine as te

    seen = {}
    real = te.check_cache_fits

    def spy(*args, **kwargs):
        seen["state"] = args[5] if len(args) > 5 else kwargs.get("state_bytes_per_slot")
        return real(*args, **kwargs)

    monkeypatch.setattr(te, "check_cache_fits", spy)
    TorchEngine.from_pretrained(pair[0], pair[1], device="cpu", tokenizer=False, max_batch_size=2, max_seq_len=64)
    assert seen["state"] == allocated // 3
