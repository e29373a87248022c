"""Checkpoints: drafter round trip in the z-lab format, accepted config spellings, and one clear error per bad input.

Every corruption works on a copy (tmp_path) of the session pair; the cached originals are never touched.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from dflash_trt import checkpoint as ckpt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import CheckpointError, DFlashError
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.target import TargetModel

VOCAB = 256  # pairs without a tokenizer: fast to make, token 0 = EOS, the last token = MASK


# ---------------------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def pair(make_pair, tmp_path):
    """Writable copies of the fp32 qwen3 pair: (target_dir, drafter_dir)."""
    target, drafter = make_pair(vocab_size=VOCAB)
    return shutil.copytree(target, tmp_path / "target"), shutil.copytree(drafter, tmp_path / "drafter")


def edit_config(directory: Path, edit) -> Path:
    path = Path(directory) / ckpt.CONFIG_NAME
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw))
    return Path(directory)


def edit_tensors(directory: Path, edit) -> Path:
    path = Path(directory) / ckpt.WEIGHTS_NAME
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})
    return Path(directory)


def load_engine(target, drafter=None):
    return TorchEngine.from_pretrained(target, drafter, device="cpu", tokenizer=False, max_batch_size=1, max_seq_len=64)


def raises_naming(exc_type, *needles):
    """pytest.raises(exc_type) whose message must contain every needle (the field, the tensor, the file...)."""

    class _Check:
        def __enter__(self):
            self._cm = pytest.raises(exc_type)
            self.info = self._cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self._cm.__exit__(*exc)
            message = str(self.info.value)
            for needle in needles:
                assert needle in message, f"error message does not name {needle!r}: {message}"
            assert "\n" not in message.strip(), f"expected a one-line message: {message!r}"
            return suppressed

    return _Check()


def split_into_shards(directory: Path, n: int = 2) -> list[str]:
    """Rewrite `directory`'s model.safetensors as n shards + model.safetensors.index.json (HF layout)."""
    tensors = load_file(str(directory / ckpt.WEIGHTS_NAME))
    names = sorted(tensors)
    per = -(-len(names) // n)
    weight_map, shard_names = {}, []
    for s in range(n):
        shard = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
        part = {name: tensors[name] for name in names[s * per:(s + 1) * per]}
        save_file(part, str(directory / shard), metadata={"format": "pt"})
        weight_map.update({name: shard for name in part})
        shard_names.append(shard)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    (directory / ckpt.INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    (directory / ckpt.WEIGHTS_NAME).unlink()
    return shard_names


def target_logits(target_dir, token_ids) -> torch.Tensor:
    model = TargetModel.from_pretrained(target_dir)
    cache = model.new_cache(1, 32)
    ids = torch.tensor([token_ids])
    with torch.inference_mode():
        logits, _ = model(ids, cache, torch.arange(1))
    return logits


ZLAB_LAYER_TENSORS = [
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    "input_layernorm.weight", "post_attention_layernorm.weight",
]


# ---------------------------------------------------------------------------------------------------------------------
# 1. round trip and the written format
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_drafter_round_trip_is_bit_exact(make_pair, tmp_path, dtype):
    _, drafter_dir = make_pair(vocab_size=VOCAB, dtype=dtype)
    drafter = DFlashDrafter.from_pretrained(drafter_dir)
    assert drafter.fc.weight.dtype == ckpt.DTYPES[dtype]
    drafter.save_pretrained(tmp_path / "saved")
    again = DFlashDrafter.from_pretrained(tmp_path / "saved")

    before, after = drafter.state_dict(), again.state_dict()
    assert sorted(before) == sorted(after)
    for name, tensor in before.items():
        assert after[name].dtype == tensor.dtype == ckpt.DTYPES[dtype], name
        assert torch.equal(after[name], tensor), name

    # ...and the file itself equals the original file, tensor by tensor
    original, written = load_file(str(drafter_dir / ckpt.WEIGHTS_NAME)), load_file(str(tmp_path / "saved" / ckpt.WEIGHTS_NAME))
    assert sorted(original) == sorted(written)
    for name in original:
        assert written[name].dtype == original[name].dtype and torch.equal(written[name], original[name]), name

    a, b = drafter.cfg, again.cfg
    for name in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                 "head_dim", "block_size", "mask_token_id", "target_layer_ids", "num_target_layers", "rope",
                 "rms_norm_eps", "vocab_size", "dtype"):
        assert getattr(a, name) == getattr(b, name), name


def test_written_drafter_is_zlab_format(make_pair, tmp_path):
    _, drafter_dir = make_pair(vocab_size=VOCAB)
    drafter = DFlashDrafter.from_pretrained(drafter_dir)
    out = tmp_path / "saved"
    drafter.save_pretrained(out)
    assert sorted(p.name for p in out.iterdir()) == [ckpt.CONFIG_NAME, ckpt.WEIGHTS_NAME]

    raw = json.loads((out / ckpt.CONFIG_NAME).read_text())
    cfg = drafter.cfg
    assert raw["architectures"] == ["DFlashDraftModel"]
    assert raw["model_type"] == "qwen3"
    assert raw["dflash_config"]["mask_token_id"] == cfg.mask_token_id == VOCAB - 1
    assert raw["dflash_config"]["target_layer_ids"] == cfg.target_layer_ids
    assert raw["block_size"] == cfg.block_size == 16
    assert raw["num_target_layers"] == cfg.num_target_layers == 6

    with safe_open(str(out / ckpt.WEIGHTS_NAME), framework="pt") as f:
        names = set(f.keys())
    assert not any(n.startswith("model.") for n in names)
    expected = {"fc.weight", "hidden_norm.weight", "norm.weight"}
    expected |= {f"layers.{i}.{t}" for i in range(cfg.num_hidden_layers) for t in ZLAB_LAYER_TENSORS}
    assert names == expected  # exactly the z-lab names: no rotary buffers, no embedding, no lm_head


def test_written_config_parses_with_transformers(make_pair, tmp_path):
    from transformers import AutoConfig, Qwen3Config

    _, drafter_dir = make_pair(vocab_size=VOCAB)
    drafter = DFlashDrafter.from_pretrained(drafter_dir)
    drafter.save_pretrained(tmp_path / "saved")
    hf = AutoConfig.from_pretrained(str(tmp_path / "saved"), local_files_only=True)
    assert isinstance(hf, Qwen3Config)
    cfg = drafter.cfg
    assert (hf.hidden_size, hf.num_hidden_layers, hf.num_attention_heads, hf.num_key_value_heads, hf.head_dim) == (
        cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim)
    assert hf.vocab_size == VOCAB
    assert hf.architectures == ["DFlashDraftModel"]


def test_model_prefixed_drafter_tensors_are_tolerated(pair, tmp_path):
    target, drafter = pair
    edit_tensors(drafter, lambda t: t.update({f"model.{k}": t.pop(k) for k in list(t)}))
    cfg = ckpt.load_drafter_config(drafter)
    tensors = ckpt.load_drafter_tensors(drafter, cfg)
    assert set(tensors) == set(ckpt.drafter_tensor_shapes(cfg))


# ---------------------------------------------------------------------------------------------------------------------
# 2. accepted spellings and defaults
# ---------------------------------------------------------------------------------------------------------------------


def test_dflash_fields_accepted_top_level(pair):
    target, drafter = pair
    nested = ckpt.load_drafter_config(drafter)

    def move_up(raw):
        raw.update(raw.pop("dflash_config"))

    edit_config(drafter, move_up)
    assert "dflash_config" not in json.loads((drafter / ckpt.CONFIG_NAME).read_text())
    top = ckpt.load_drafter_config(drafter)
    assert top.mask_token_id == nested.mask_token_id == VOCAB - 1
    assert top.target_layer_ids == nested.target_layer_ids
    engine = load_engine(target, drafter)  # and the pair still loads
    assert engine.drafter.mask_token_id == VOCAB - 1


def test_default_target_layer_ids():
    assert ckpt.default_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]  # Qwen3-8B + the 5-layer z-lab drafter
    for layers in (6, 28, 36, 64):
        assert ckpt.default_target_layer_ids(layers, 1) == [layers // 2]
    ids = ckpt.default_target_layer_ids(28, 3)
    assert ids == sorted(ids) and ids[0] == 1 and ids[-1] == 25


def test_missing_target_layer_ids_uses_defaults(pair):
    target, drafter = pair
    edit_config(drafter, lambda raw: raw["dflash_config"].pop("target_layer_ids"))
    cfg = ckpt.load_drafter_config(drafter)
    assert cfg.target_layer_ids == ckpt.default_target_layer_ids(6, cfg.num_hidden_layers)
    load_engine(target, drafter)


# ---------------------------------------------------------------------------------------------------------------------
# 3. one clear error per bad input
# ---------------------------------------------------------------------------------------------------------------------


CONFIG_CASES = {
    # name: (which dir, edit, fields the message must name)
    "drafter hidden_size != target": ("drafter", lambda r: r.update(hidden_size=128), ["hidden_size", "128", "64"]),
    "vocab_size mismatch": ("drafter", lambda r: r.update(vocab_size=VOCAB + 64), ["vocab_size"]),
    "num_target_layers != target layers": ("drafter", lambda r: r.update(num_target_layers=5), ["num_target_layers", "5", "6"]),
    "target_layer_ids out of range": ("drafter", lambda r: r["dflash_config"].update(target_layer_ids=[0, 99]),
                                      ["target_layer_ids", "99"]),
    "target_layer_ids negative": ("drafter", lambda r: r["dflash_config"].update(target_layer_ids=[-1, 3]),
                                  ["target_layer_ids", "-1"]),
    "target_layer_ids not a list": ("drafter", lambda r: r["dflash_config"].update(target_layer_ids="1,3"),
                                    ["target_layer_ids"]),
    "mask_token_id >= vocab": ("drafter", lambda r: r["dflash_config"].update(mask_token_id=VOCAB), ["mask_token_id", str(VOCAB)]),
    "mask_token_id missing": ("drafter", lambda r: r["dflash_config"].pop("mask_token_id"), ["mask_token_id"]),
    "mask_token_id negative": ("drafter", lambda r: r["dflash_config"].update(mask_token_id=-1), ["mask_token_id"]),
    "block_size missing": ("drafter", lambda r: r.pop("block_size"), ["block_size"]),
    "block_size 1": ("drafter", lambda r: r.update(block_size=1), ["block_size"]),
    "num_target_layers missing": ("drafter", lambda r: r.pop("num_target_layers"), ["num_target_layers"]),
    "unsupported target architecture": ("target", lambda r: r.update(architectures=["GPT2LMHeadModel"]),
                                        ["architectures", "GPT2LMHeadModel"]),
    "drafter architecture not DFlashDraftModel": ("drafter", lambda r: r.update(architectures=["Qwen3ForCausalLM"]),
                                                   ["architectures", "DFlashDraftModel"]),
    # sliding_attention drafter layers are supported (tests/test_sliding_drafter.py); other layer types are not
    "drafter unknown layer type": ("drafter", lambda r: r.update(layer_types=["full_attention", "linear_attention"]),
                                   ["layer_types", "linear_attention"]),
    "target sliding_attention layers": ("target", lambda r: r.update(layer_types=["full_attention"] * 5 + ["sliding_attention"]),
                                        ["layer_types", "sliding"]),
    "drafter is_causal": ("drafter", lambda r: r.update(is_causal="yes"), ["is_causal"]),
    "dynamic rope": ("drafter", lambda r: r.update(rope_parameters={"rope_type": "dynamic", "rope_theta": 1e6, "factor": 2.0},
                                                   rope_scaling={"rope_type": "dynamic", "factor": 2.0}), ["rope", "dynamic"]),
    "model_type missing": ("drafter", lambda r: r.pop("model_type"), ["model_type"]),
    "hidden_size missing": ("drafter", lambda r: r.pop("hidden_size"), ["hidden_size"]),
    "heads not a multiple of kv heads": ("target", lambda r: r.update(num_attention_heads=3), ["num_attention_heads", "num_key_value_heads"]),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_bad_config_gives_one_clear_error(pair, case):
    which, edit, needles = CONFIG_CASES[case]
    target, drafter = pair
    edit_config(target if which == "target" else drafter, edit)
    with raises_naming(CheckpointError, *needles) as info:
        load_engine(target, drafter)
    assert which in str(info.value)  # says which checkpoint is at fault


@pytest.mark.parametrize("case", ["drafter hidden_size != target", "vocab_size mismatch", "num_target_layers != target layers",
                                  "target_layer_ids out of range", "mask_token_id >= vocab"])
def test_check_pair_directly(pair, case):
    _, edit, needles = CONFIG_CASES[case]
    target, drafter = pair
    edit_config(drafter, edit)
    target_cfg, drafter_cfg = ckpt.load_target_config(target), ckpt.load_drafter_config(drafter)
    with raises_naming(CheckpointError, *needles):
        ckpt.check_pair(target_cfg, drafter_cfg, drafter)


def test_mismatched_pair_from_different_targets(make_pair):
    """A real mismatch: a drafter made for a wider target."""
    target, _ = make_pair(vocab_size=VOCAB)
    _, wide_drafter = make_pair(vocab_size=VOCAB, hidden=32, heads=2, kv_heads=1)
    with raises_naming(CheckpointError, "hidden_size"):
        load_engine(target, wide_drafter)


def test_layer_types_wrong_length_is_a_checkpoint_error(pair):
    target, drafter = pair
    edit_config(drafter, lambda r: r.update(layer_types=["full_attention"]))  # 2 layers, 1 entry
    try:
        load_engine(target, drafter)
    except CheckpointError as err:
        assert "layer_types" in str(err)
    except Exception as err:  # noqa: BLE001 - what leaks today
        raise AssertionError(f"leaked {type(err).__name__}: {err}") from None
    else:
        raise AssertionError("no error")


def test_wrongly_typed_field_is_a_checkpoint_error(pair):
    target, drafter = pair
    edit_config(drafter, lambda r: r.update(hidden_size="64"))
    try:
        load_engine(target, drafter)
    except CheckpointError as err:
        assert "hidden_size" in str(err)
    except Exception as err:  # noqa: BLE001
        raise AssertionError(f"leaked {type(err).__name__}: {err}") from None
    else:
        raise AssertionError("no error")


# ---- files and directories ------------------------------------------------------------------------------------------


def test_directory_missing(pair, tmp_path):
    target, _ = pair
    with raises_naming(CheckpointError, "drafter", "does not exist", str(tmp_path / "nope")):
        load_engine(target, tmp_path / "nope")
    with raises_naming(CheckpointError, "target", "does not exist"):
        load_engine(tmp_path / "nope")


def test_config_json_missing(pair):
    target, drafter = pair
    (drafter / ckpt.CONFIG_NAME).unlink()
    with raises_naming(CheckpointError, "drafter", "config.json"):
        load_engine(target, drafter)


@pytest.mark.parametrize("text", ['{"hidden_size": ', "[1, 2]", b"\xff\xfe\x00"], ids=["truncated", "not-object", "binary"])
def test_config_json_invalid(pair, text):
    target, drafter = pair
    path = target / ckpt.CONFIG_NAME
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with raises_naming(CheckpointError, "target", "config.json"):
        load_engine(target, drafter)


def test_missing_tensor(pair):
    target, drafter = pair
    edit_tensors(drafter, lambda t: t.pop("layers.1.mlp.up_proj.weight"))
    with raises_naming(CheckpointError, "drafter", "layers.1.mlp.up_proj.weight", "missing"):
        load_engine(target, drafter)
    cfg = ckpt.load_drafter_config(drafter)
    with raises_naming(CheckpointError, "layers.1.mlp.up_proj.weight"):
        ckpt.load_drafter_tensors(drafter, cfg)


def test_missing_target_tensor(pair):
    target, drafter = pair
    edit_tensors(target, lambda t: t.pop("lm_head.weight"))
    with raises_naming(CheckpointError, "target", "lm_head.weight"):
        load_engine(target, drafter)


def test_misshaped_tensor(pair):
    target, drafter = pair
    edit_tensors(drafter, lambda t: t.update({"fc.weight": torch.zeros(64, 64)}))
    with raises_naming(CheckpointError, "drafter", "fc.weight", "[64, 64]", "[64, 128]"):
        load_engine(target, drafter)


def test_config_disagreeing_with_weights(pair):
    """A config edit that passes the pair check (head_dim) but no longer matches the weights."""
    target, drafter = pair
    edit_config(drafter, lambda r: r.update(head_dim=8))
    with raises_naming(CheckpointError, "drafter", "q_proj.weight"):
        load_engine(target, drafter)


def test_integer_weights_are_refused(pair):
    target, drafter = pair
    edit_tensors(drafter, lambda t: t.update({k: v.to(torch.int8) for k, v in t.items()}))
    try:
        load_engine(target, drafter)
    except CheckpointError as err:
        assert "int8" in str(err) or "dtype" in str(err)
    else:
        raise AssertionError("int8 weights were accepted")


def test_pickle_only_checkpoint_is_refused_without_unpickling(pair, monkeypatch):
    import pickle

    target, drafter = pair
    (drafter / ckpt.WEIGHTS_NAME).unlink()
    (drafter / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not really a zip: must never be opened")

    def forbidden(*args, **kwargs):
        raise AssertionError("a pickle loader was called")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    with raises_naming(CheckpointError, "drafter", "pytorch_model.bin", "safetensors only"):
        load_engine(target, drafter)


def test_no_weights_at_all(pair):
    target, drafter = pair
    (drafter / ckpt.WEIGHTS_NAME).unlink()
    with raises_naming(CheckpointError, "drafter", "safetensors"):
        load_engine(target, drafter)


@pytest.mark.parametrize("keep", [0, 5, 100, "half"])
def test_corrupt_safetensors(pair, keep):
    target, drafter = pair
    path = drafter / ckpt.WEIGHTS_NAME
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if keep == "half" else keep])
    with raises_naming(CheckpointError, "drafter", str(path), "safetensors"):
        load_engine(target, drafter)


def test_garbage_safetensors(pair):
    target, drafter = pair
    (target / ckpt.WEIGHTS_NAME).write_bytes(b"\xff" * 4096)
    with raises_naming(CheckpointError, "target", "safetensors"):
        load_engine(target, drafter)


def test_sharded_target_loads_identically(make_pair, tmp_path):
    target, drafter = make_pair(vocab_size=VOCAB)
    sharded = shutil.copytree(target, tmp_path / "sharded")
    shards = split_into_shards(sharded)
    assert len(shards) == 2 and not (sharded / ckpt.WEIGHTS_NAME).exists()
    ids = [3, 17, 42, 99, 7, 200, 1, 5]
    assert torch.equal(target_logits(sharded, ids), target_logits(target, ids))
    engine = load_engine(sharded, drafter)  # and as part of a pair
    assert engine.drafter is not None


def test_sharded_index_naming_missing_shard(pair):
    target, drafter = pair
    shards = split_into_shards(target)
    (target / shards[1]).unlink()
    with raises_naming(CheckpointError, "target", ckpt.INDEX_NAME, shards[1], "missing"):
        load_engine(target, drafter)


def test_sharded_index_invalid_json(pair):
    target, drafter = pair
    split_into_shards(target)
    (target / ckpt.INDEX_NAME).write_text('{"weight_map": {')
    with raises_naming(CheckpointError, "target", ckpt.INDEX_NAME):
        load_engine(target, drafter)


@pytest.mark.parametrize("weight_map", [["model-00001-of-00002.safetensors"], {"fc.weight": 3}], ids=["list", "int-shard"])
def test_sharded_index_malformed_weight_map(pair, weight_map):
    target, drafter = pair
    (drafter / ckpt.INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    try:
        load_engine(target, drafter)
    except CheckpointError as err:
        assert ckpt.INDEX_NAME in str(err)
    except Exception as err:  # noqa: BLE001
        raise AssertionError(f"leaked {type(err).__name__}: {err}") from None
    else:
        raise AssertionError("no error")


def test_all_errors_are_dflash_errors():
    assert issubclass(CheckpointError, DFlashError)


# ---------------------------------------------------------------------------------------------------------------------
# 4. validation before heavy work
# ---------------------------------------------------------------------------------------------------------------------


class _WeightsTouched(Exception):
    pass


def _forbid_weight_loading(monkeypatch):
    def forbidden(*args, **kwargs):
        raise _WeightsTouched("weights were read before the configs were validated")

    monkeypatch.setattr(ckpt, "load_safetensors_dir", forbidden)


@pytest.mark.parametrize("case", ["drafter hidden_size != target", "vocab_size mismatch", "num_target_layers != target layers",
                                  "target_layer_ids out of range", "mask_token_id >= vocab"])
def test_pair_is_validated_before_weights_are_read(pair, monkeypatch, case):
    _, edit, needles = CONFIG_CASES[case]
    target, drafter = pair
    edit_config(drafter, edit)
    _forbid_weight_loading(monkeypatch)
    with raises_naming(CheckpointError, *needles):
        load_engine(target, drafter)


def test_weight_guard_is_effective(pair, monkeypatch):
    """Control for the test above: for a good pair the patched loader *is* reached."""
    target, drafter = pair
    _forbid_weight_loading(monkeypatch)
    with pytest.raises(_WeightsTouched):
        load_engine(target, drafter)


# ---------------------------------------------------------------------------------------------------------------------
# 5. atomic writes
# ---------------------------------------------------------------------------------------------------------------------


def _failing_save_file(tensors, filename, metadata=None):
    Path(filename).write_bytes(b"half a safetensors file")  # fail *midway*: something is already on disk
    raise OSError("disk full (simulated)")


def test_failed_save_leaves_nothing_behind(make_pair, tmp_path, monkeypatch):
    import safetensors.torch

    _, drafter_dir = make_pair(vocab_size=VOCAB)
    drafter = DFlashDrafter.from_pretrained(drafter_dir)
    parent = tmp_path / "out"
    parent.mkdir()
    monkeypatch.setattr(safetensors.torch, "save_file", _failing_save_file)
    with pytest.raises(OSError, match="disk full"):
        drafter.save_pretrained(parent / "drafter")
    assert not (parent / "drafter").exists()
    assert list(parent.iterdir()) == []  # no temp dirs either


def test_failed_save_keeps_the_previous_checkpoint(make_pair, tmp_path, monkeypatch):
    import safetensors.torch

    _, drafter_dir = make_pair(vocab_size=VOCAB)
    drafter = DFlashDrafter.from_pretrained(drafter_dir)
    dest = tmp_path / "drafter"
    drafter.save_pretrained(dest)
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    monkeypatch.setattr(safetensors.torch, "save_file", _failing_save_file)
    with pytest.raises(OSError):
        drafter.save_pretrained(dest)
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drafter"]


def test_save_refuses_mismatched_tensors_before_writing(make_pair, tmp_path):
    _, drafter_dir = make_pair(vocab_size=VOCAB)
    drafter = DFlashDrafter.from_pretrained(drafter_dir)
    tensors = dict(drafter.state_dict())
    tensors["fc.weight"] = torch.zeros(3, 3)
    with raises_naming(CheckpointError, "fc.weight"):
        ckpt.save_drafter(tmp_path / "bad", drafter.cfg, tensors)
    assert not (tmp_path / "bad").exists()
    assert list(tmp_path.iterdir()) == []


def test_no_temp_dirs_after_successful_save(make_pair, tmp_path):
    _, drafter_dir = make_pair(vocab_size=VOCAB)
    DFlashDrafter.from_pretrained(drafter_dir).save_pretrained(tmp_path / "d")
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
    assert not [p for p in tmp_path.iterdir() if re.match(r"^\.", p.name)]
