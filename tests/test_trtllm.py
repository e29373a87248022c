"""Backend trtllm: the LLM API options we write, checked against TensorRT-LLM's own field names and types (recorded
from its source in tests/data/trtllm_api_fields.json), the GPU requirement checks, the quantized drafter's
exclude_modules under TensorRT-LLM's module naming, the request/statistics mapping, and the import gate.

TensorRT-LLM cannot be installed here: the tests that need it skip with TRTLLM_MISSING as the reason. Nothing here
imitates TensorRT-LLM; the checks run our outputs against facts recorded from its source.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dflash_trt import checkpoint as ckpt
from dflash_trt.engines import trtllm_options as opt
from dflash_trt.engines.trtllm_engine import (TRTLLM_MISSING, EngineDir, TrtllmEngine, stats_from_deltas,
                                              stop_token_ids, to_trtllm_sampling_kwargs, trtllm_available)
from dflash_trt.errors import ConfigError
from dflash_trt.spec.sampling import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
FACTS = json.loads((ROOT / "tests/data/trtllm_api_fields.json").read_text())
CLASSES, ALIASES, UNIONS = FACTS["classes"], FACTS["aliases"], FACTS["discriminated_unions"]


# ---- a checker for values against the recorded annotations ----------------------------------------------------------


def _literal_values(node: ast.AST) -> list:
    elts = node.elts if isinstance(node, ast.Tuple) else [node]
    return [ast.literal_eval(e) for e in elts]


def _union_member(union: dict, value) -> str | None:
    """The member class of a discriminated union that `value` (a dict) selects, as pydantic would."""
    disc = union["discriminator"]
    tag = value.get(disc)
    if tag is None and disc == "mode":
        tag = "decode"  # TorchLlmArgs.infer_cuda_graph_config_mode: a dict without `mode` and no encoder keys
    for member in union["members"]:
        cls = CLASSES.get(ALIASES.get(member, member))
        if cls and disc in cls["fields"]:
            lit = ast.parse(cls["fields"][disc]["type"], mode="eval").body
            if isinstance(lit, ast.Subscript) and tag in _literal_values(lit.slice):
                return ALIASES.get(member, member)
    return None


def conforms(value, annotation: str) -> list[str]:
    """Problems (empty = fine) of `value` against a recorded annotation string."""
    return _check(value, ast.parse(annotation, mode="eval").body, annotation)


def _check(value, node: ast.AST, where: str) -> list[str]:
    bad = [f"{where}: {value!r} does not fit {ast.unparse(node)}"]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [] if not _check(value, node.left, where) or not _check(value, node.right, where) else bad
    if isinstance(node, ast.Constant) and node.value is None:
        return [] if value is None else bad
    if isinstance(node, ast.Subscript):
        head = ast.unparse(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return [] if value is None else _check(value, args[0], where)
        if head == "Union":
            return [] if any(not _check(value, a, where) for a in args) else bad
        if head in ("List", "list", "Set", "set"):
            if not isinstance(value, list):
                return bad
            return [p for v in value for p in _check(v, args[0], where + "[]")]
        if head in ("Dict", "dict"):
            if not isinstance(value, dict):
                return bad
            return [p for k, v in value.items() for p in _check(k, args[0], where) + _check(v, args[1], where)]
        if head == "Literal":
            return [] if value in _literal_values(node.slice) else bad
        return [f"{where}: unknown annotation {ast.unparse(node)}"]
    name = ast.unparse(node)
    simple = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "Path": lambda v: isinstance(v, str),
        "NonNegativeInt": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "PositiveInt": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
        "NonNegativeFloat": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
    }
    if name in simple:
        return [] if simple[name](value) else bad
    if name in UNIONS:
        if not isinstance(value, dict):
            return bad
        member = _union_member(UNIONS[name], value)
        if member is None:
            return [f"{where}: {value!r} selects no member of {name}"]
        return check_class(value, member, where)
    if name in CLASSES or name in ALIASES:
        return check_class(value, ALIASES.get(name, name), where) if isinstance(value, dict) else bad
    return [f"{where}: unknown annotation {name}"]


def check_class(values: dict, cls: str, where: str = "") -> list[str]:
    """Problems of a dict given as the keyword arguments of a recorded class (pydantic extra='forbid' semantics)."""
    fields = CLASSES[cls]["fields"]
    by_alias = {a: n for n, f in fields.items() for a in f.get("aliases", [])}
    problems = []
    for key, value in values.items():
        name = by_alias.get(key, key)
        if name not in fields:
            problems.append(f"{where}{key}: not a field of TensorRT-LLM's {cls}")
            continue
        f = fields[name]
        if f.get("init") is False:
            problems.append(f"{where}{key}: {cls}.{name} is not settable")
        problems += _check(value, ast.parse(f["type"], mode="eval").body, f"{where}{key}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for c, ok in (("ge", value >= f.get("ge", value)), ("gt", "gt" not in f or value > f["gt"]),
                          ("le", value <= f.get("le", value)), ("lt", "lt" not in f or value < f["lt"])):
                if not ok:
                    problems.append(f"{where}{key}: {value} violates {c} {f[c]}")
    for name, f in fields.items():
        if f.get("required") and name not in values and not (set(f.get("aliases", [])) & set(values)):
            problems.append(f"{where}{name}: required by {cls}")
    return problems


def _options(**over):
    kw = dict(target_dir="/models/target", drafter_dir="/engines/e/drafter", max_batch_size=8, max_seq_len=2048,
              verify_len=16, cuda_graph_batch_sizes=[1, 2, 4, 8], kv_cache_free_gpu_memory_fraction=0.9,
              tensor_parallel_size=1, dtype="bfloat16", mask_token_id=151669, target_layer_ids=[1, 9, 17, 25, 33])
    kw.update(over)
    return opt.llm_api_options(**kw)


# ---- the fact sheet --------------------------------------------------------------------------------------------------


def test_fact_sheet_records_its_source():
    src = FACTS["source"]
    assert src["repo"] == "NVIDIA/TensorRT-LLM"
    assert src["files"]["tensorrt_llm/llmapi/llm_args.py"] == opt.TRTLLM_SOURCE_COMMIT
    assert all(len(c) == 40 for c in src["files"].values())
    dflash = CLASSES["DFlashDecodingConfig"]["fields"]
    assert dflash["decoding_type"] == {"type": "Literal['DFlash']", "default": "DFlash"}
    assert dflash["speculative_model"]["aliases"] == ["speculative_model", "speculative_model_dir"]
    assert {"max_draft_len", "mask_token_id", "target_layer_ids", "attention_backend"} <= set(dflash)
    assert CLASSES["KvCacheConfig"]["fields"]["free_gpu_memory_fraction"] == {
        "type": "Optional[float]", "default": 0.9, "ge": 0, "le": 1}
    assert CLASSES["TorchLlmArgs"]["model_config"]["extra"] == "forbid"
    assert "DFlashDecodingConfig" in UNIONS["SpeculativeConfig"]["members"]


def test_extraction_script_reads_pydantic_and_dataclass_declarations(tmp_path):
    """The extractor on a small file of our own with the declaration forms llm_args.py uses."""
    src = tmp_path / "mod.py"
    src.write_text(
        "class Base(StrictBaseModel):\n"
        "    model_config = ConfigDict(extra='forbid')\n"
        "    a: Optional[int] = Field(default=None, ge=0)\n"
        "    b: str = Field(description='required, no default')\n"
        "    _p: int = PrivateAttr(default=1)\n"
        "    K: ClassVar[int] = 3\n"
        "class Child(Base):\n"
        "    a: int = Field(default=4)\n"
        "    m: Optional[Union[str, Path]] = Field(default=None, validation_alias=AliasChoices('m', 'm_dir'))\n"
        "    f: Sub = Field(default_factory=Sub)\n"
        "    e: Mode = Field(default=Mode.X)\n"
        "Alias = Child\n"
        "U: TypeAlias = Annotated[Union[Child, Base], Field(discriminator='kind')]\n"
        "@dataclass\n"
        "class DC:\n"
        "    x: int = 32\n"
        "    _y: int = field(default=0, init=False)\n"
        "    z: list = field(default_factory=list)\n")
    out = tmp_path / "facts.json"
    subprocess.run([sys.executable, str(ROOT / "scripts/extract_trtllm_fields.py"), "--llm-args", str(src),
                    "--classes", "Child,DC", "--commit", "c" * 40, "-o", str(out)], check=True)
    facts = json.loads(out.read_text())
    child = facts["classes"]["Child"]
    assert child["bases"] == ["Base", "StrictBaseModel"]
    assert child["model_config"] == {"extra": "forbid"}
    assert child["fields"] == {
        "a": {"type": "int", "default": 4},
        "b": {"type": "str", "required": True},
        "m": {"type": "Optional[Union[str, Path]]", "default": None, "aliases": ["m", "m_dir"]},
        "f": {"type": "Sub", "default_factory": "Sub"},
        "e": {"type": "Mode", "default_expr": "Mode.X"},
    }
    assert facts["classes"]["DC"]["fields"] == {"x": {"type": "int", "default": 32},
                                                "z": {"type": "list", "default_factory": "list"}}
    assert facts["aliases"] == {"Alias": "Child"}
    assert facts["discriminated_unions"]["U"] == {"members": ["Child", "Base"], "discriminator": "kind"}
    assert facts["source"]["files"]["tensorrt_llm/llmapi/llm_args.py"] == "c" * 40


def test_checker_rejects_wrong_names_and_types():
    """The checker can fail: a misspelled field, a wrong type, an out-of-range value, a bad discriminator."""
    good = _options()
    assert check_class(good, "TorchLlmArgs") == []
    assert check_class({**good, "free_gpu_memory_fraction": 0.9}, "TorchLlmArgs")  # belongs in kv_cache_config
    assert check_class({**good, "max_batch_size": "8"}, "TorchLlmArgs")
    assert check_class({**good, "kv_cache_config": {"free_gpu_memory_fraction": 1.5}}, "TorchLlmArgs")
    assert check_class({**good, "kv_cache_config": {"free_gpu_mem_fraction": 0.5}}, "TorchLlmArgs")
    spec = good["speculative_config"]
    assert check_class({**good, "speculative_config": {**spec, "decoding_type": "Dflash"}}, "TorchLlmArgs")
    assert check_class({**good, "speculative_config": {**spec, "block_size": 16}}, "TorchLlmArgs")
    assert check_class({**good, "speculative_config": {**spec, "target_layer_ids": "1,2"}}, "TorchLlmArgs")
    assert check_class({**good, "cuda_graph_config": {"batch_sizes": [1], "padding": True}}, "TorchLlmArgs")
    assert check_class({k: v for k, v in good.items() if k != "model"}, "TorchLlmArgs")  # model is required
    alias_only = {k: v for k, v in spec.items() if k != "speculative_model"} | {"speculative_model_dir": "/d"}
    assert check_class({**good, "speculative_config": alias_only}, "TorchLlmArgs") == []


# ---- the options we write ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("over", [
    {},
    {"drafter_dir": None},                           # plain AR
    {"cuda_graph_batch_sizes": []},                  # CUDA graphs off
    {"verify_len": 2, "dtype": "auto", "tensor_parallel_size": 2, "mask_token_id": None, "target_layer_ids": None},
    {"max_batch_size": 64, "verify_len": 10, "cuda_graph_batch_sizes": [64, 1, 8, 8], "kv_cache_free_gpu_memory_fraction": 1},
])
def test_options_use_only_trtllm_fields_with_right_types(over):
    options = _options(**over)
    assert check_class(options, "TorchLlmArgs") == []
    # what pydantic will build from the nested dicts
    if options.get("speculative_config"):
        assert _union_member(UNIONS["SpeculativeConfig"], options["speculative_config"]) == "DFlashDecodingConfig"
    if options.get("cuda_graph_config"):
        assert _union_member(UNIONS["CudaGraphConfigType"], options["cuda_graph_config"]) == "DecodeCudaGraphConfig"


def test_options_values():
    o = _options()
    assert o["model"] == "/models/target"
    assert o["speculative_config"] == {"decoding_type": "DFlash", "max_draft_len": 15,
                                       "speculative_model": "/engines/e/drafter", "mask_token_id": 151669,
                                       "target_layer_ids": [1, 9, 17, 25, 33]}
    assert o["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": False}
    assert o["cuda_graph_config"] == {"batch_sizes": [1, 2, 4, 8], "enable_padding": True}
    assert o["stream_interval"] == 1 and o["max_batch_size"] == 8 and o["max_seq_len"] == 2048
    assert o["max_num_tokens"] >= o["max_batch_size"] * 16
    assert _options(cuda_graph_batch_sizes=[8, 2, 2])["cuda_graph_config"]["batch_sizes"] == [2, 8]
    assert _options(cuda_graph_batch_sizes=[])["cuda_graph_config"] is None
    assert "speculative_config" not in _options(drafter_dir=None)
    assert opt.max_draft_len(16) == 15 and opt.max_draft_len(2) == 1
    rel = _options(target_dir="relative/target")["model"]
    assert Path(rel).is_absolute() and rel.endswith("relative/target")


@pytest.mark.parametrize("over, field", [
    ({"dtype": "float32"}, "runtime.dtype"),
    ({"dtype": "fp8"}, "runtime.dtype"),
    ({"verify_len": 1}, "runtime.verify_len"),
    ({"max_batch_size": 0}, "runtime.max_batch_size"),
    ({"kv_cache_free_gpu_memory_fraction": 0}, "runtime.kv_cache_free_gpu_memory_fraction"),
    ({"kv_cache_free_gpu_memory_fraction": 1.2}, "runtime.kv_cache_free_gpu_memory_fraction"),
    ({"cuda_graph_batch_sizes": [1, 16]}, "runtime.cuda_graph_batch_sizes"),
    ({"cuda_graph_batch_sizes": "1,2"}, "runtime.cuda_graph_batch_sizes"),
    ({"tensor_parallel_size": True}, "runtime.tensor_parallel_size"),
    ({"target_layer_ids": []}, "drafter.target_layer_ids"),
    ({"mask_token_id": -1}, "drafter.mask_token_id"),
])
def test_options_refuse_bad_values(over, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        _options(**over)


def test_yaml_round_trip(tmp_path):
    o = _options()
    path = opt.write_llm_api_options(tmp_path / "trtllm" / opt.LLM_API_OPTIONS_NAME, o)
    text = path.read_text()
    assert text.startswith("# TensorRT-LLM LLM API options") and "--config" in text
    assert yaml.safe_load(text) == o == opt.read_llm_api_options(path)
    assert [p.name for p in path.parent.iterdir()] == [opt.LLM_API_OPTIONS_NAME]  # no temp file left
    (tmp_path / "bad.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        opt.read_llm_api_options(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="missing"):
        opt.read_llm_api_options(tmp_path / "none.yaml")


# ---- GPU requirements -------------------------------------------------------------------------------------------------


def test_nvfp4_needs_blackwell():
    with pytest.raises(ConfigError) as err:
        opt.check_trtllm_requirements("nvfp4", (9, 0))
    msg = str(err.value)
    assert "drafter.quantization nvfp4" in msg and "sm_100" in msg and "sm_90" in msg and "fp8" in msg
    assert "\n" not in msg
    for cc in [(10, 0), (10, 3), (12, 0)]:
        assert opt.check_trtllm_requirements("nvfp4", cc) == (10, 0)
    with pytest.raises(ConfigError, match="to none"):  # an sm_86 GPU has no FP8 either
        opt.check_trtllm_requirements("nvfp4", (8, 6))


def test_fp8_and_baseline_requirements():
    with pytest.raises(ConfigError, match=r"drafter\.quantization fp8 .*sm_89.*sm_86"):
        opt.check_trtllm_requirements("fp8", (8, 6))
    assert opt.check_trtllm_requirements("fp8", (8, 9)) == (8, 9)
    assert opt.check_trtllm_requirements("fp8", (9, 0)) == (8, 9)
    with pytest.raises(ConfigError, match="backend torch"):
        opt.check_trtllm_requirements("none", (7, 5))
    assert opt.check_trtllm_requirements("none", (8, 0)) == (8, 0)
    assert opt.check_trtllm_requirements("nvfp4", None) == (10, 0)  # no GPU known: record, do not fail
    assert opt.trtllm_min_compute_capability("fp8") == (8, 9)
    with pytest.raises(ConfigError, match="drafter.quantization 'int4'"):
        opt.check_trtllm_requirements("int4", (10, 0))
    with pytest.raises(ConfigError, match="runtime.dtype 'float32'"):
        opt.check_trtllm_requirements("none", (9, 0), dtype="float32")


# ---- exclude_modules under TensorRT-LLM's draft naming ---------------------------------------------------------------


def _trtllm_excluded(name: str, patterns: list[str]) -> bool:
    """TensorRT-LLM's rule: QuantConfig.is_module_excluded_from_quantization (fnmatchcase; newer versions also try
    every dotted ancestor) applied by DecoderModelForCausalLM.apply_quant_config_exclude_modules to the module name
    and, for a fused qkv_proj, to q_proj / k_proj / v_proj in its place."""
    candidates = [name]
    if name.endswith(".qkv_proj"):
        candidates += [name.replace("qkv_proj", p) for p in ("q_proj", "k_proj", "v_proj")]
    for c in candidates:
        parts = c.split(".")
        for k in range(len(parts), 0, -1):
            if any(fnmatch.fnmatchcase(".".join(parts[:k]), p) for p in patterns):
                return True
    return False


def _draft_linears(num_layers: int) -> list[str]:
    """The Linear modules of the draft backbone TensorRT-LLM builds (Qwen3ForCausalLM; weights remapped from
    `layers.N.*` to `model.layers.N.*` by DFlashForCausalLM.load_weights)."""
    names = ["lm_head"]
    for i in range(num_layers):
        names += [f"model.layers.{i}.self_attn.qkv_proj", f"model.layers.{i}.self_attn.o_proj",
                  f"model.layers.{i}.mlp.gate_up_proj", f"model.layers.{i}.mlp.down_proj"]
    return names


@pytest.mark.parametrize("layers", [1, 5])
def test_exclude_modules_keep_qkv_bf16_and_quantize_the_rest(layers):
    patterns = opt.trtllm_exclude_modules(layers)
    for name in _draft_linears(layers):
        keep_bf16 = name == "lm_head" or name.endswith("qkv_proj")
        assert _trtllm_excluded(name, patterns) == keep_bf16, name
    assert "fc" in patterns  # a plain nn.Linear in TensorRT-LLM, stated for readers of the checkpoint


def test_modelopt_default_exclusion_would_unquantize_every_draft_layer():
    """What the issue warns about: ModelOpt's DFlash export lists ["lm_head", "model*"]; under the draft's
    `model.layers.*` names that matches every Linear, so nothing of the drafter would run quantized."""
    assert all(_trtllm_excluded(n, ["lm_head", "model*"]) for n in _draft_linears(5))


def test_checkpoint_names_match_our_drafter_tensors(make_pair):
    target, drafter = make_pair()
    cfg = ckpt.load_drafter_config(drafter)
    tensors = set(ckpt.drafter_tensor_shapes(cfg))
    bf16 = opt.bf16_checkpoint_modules(cfg.num_hidden_layers)
    for module in bf16:
        assert f"{module}.weight" in tensors, module
    assert set(bf16) <= set(opt.trtllm_exclude_modules(cfg.num_hidden_layers))
    # our checkpoint names never exclude a TensorRT-LLM module by accident
    assert not any(_trtllm_excluded(n, bf16) for n in _draft_linears(cfg.num_hidden_layers))


# ---- requests and statistics ----------------------------------------------------------------------------------------


def test_sampling_kwargs_are_trtllm_sampling_params_fields():
    for p in [SamplingParams(), SamplingParams(max_new_tokens=7, temperature=0.7, top_k=20, top_p=0.9, seed=3,
                                               stop_token_ids=(5, 6), ignore_eos=True)]:
        kw = to_trtllm_sampling_kwargs(p, eos_token_ids=[2, 5], seed=11)
        assert check_class(kw, "SamplingParams") == []
    greedy = to_trtllm_sampling_kwargs(SamplingParams(max_new_tokens=9), [2, 7], seed=1)
    assert greedy["temperature"] == 0.0 and greedy["top_k"] is None and greedy["top_p"] is None
    assert greedy["max_tokens"] == 9 and greedy["seed"] == 1
    assert greedy["stop_token_ids"] == [2, 7] and greedy["include_stop_str_in_output"] and greedy["ignore_eos"]
    sampled = to_trtllm_sampling_kwargs(SamplingParams(temperature=0.7, top_k=20, top_p=0.9, stop_token_ids=(5,),
                                                       ignore_eos=True), [2], seed=4)
    assert sampled["top_k"] == 20 and sampled["top_p"] == 0.9 and sampled["stop_token_ids"] == [5]
    assert to_trtllm_sampling_kwargs(SamplingParams(ignore_eos=True), [2], 0)["stop_token_ids"] is None
    assert stop_token_ids(SamplingParams(stop_token_ids=(7, 2)), [2, 3]) == [7, 2, 3]


def test_stats_from_streamed_deltas():
    stats, per_step = stats_from_deltas([1, 4, 0, 1, 16, 3], verify_len=16)
    assert per_step and stats.taus == [4, 1, 16, 3] and stats.new_tokens == 25
    assert stats.mean_tau == 6.0 and stats.histogram[3] == 1 and stats.histogram[15] == 1
    assert stats.draft_steps == {"chain:16": 4} and stats.draft_tokens == 60  # the fixed chain, as the torch engine says
    coalesced, per_step = stats_from_deltas([1, 20, 5], verify_len=16)
    assert not per_step and coalesced.taus == [] and coalesced.new_tokens == 26 and coalesced.draft_steps == {}
    ar, _ = stats_from_deltas([1, 1, 1, 1], verify_len=1)
    assert ar.taus == [1, 1, 1] and ar.mean_tau == 1.0 and ar.draft_steps == {"chain:1": 3} and ar.draft_tokens == 0


# ---- engine directories and the import gate ---------------------------------------------------------------------------


def _engine_dir(root: Path, target: Path, drafter: Path, **manifest_over) -> Path:
    e = root / "engine"
    (e / "trtllm").mkdir(parents=True)
    dcfg = ckpt.load_drafter_config(drafter)
    options = opt.llm_api_options(target_dir=target, drafter_dir=drafter, max_batch_size=4, max_seq_len=256,
                                  verify_len=dcfg.block_size, cuda_graph_batch_sizes=[1, 2, 4],
                                  kv_cache_free_gpu_memory_fraction=0.5, tensor_parallel_size=1, dtype="bfloat16",
                                  mask_token_id=dcfg.mask_token_id, target_layer_ids=dcfg.target_layer_ids)
    opt.write_llm_api_options(e / "trtllm" / opt.LLM_API_OPTIONS_NAME, options)
    manifest = {"format": "dflash-trt-engine", "format_version": 1, "backend": "trtllm",
                "target": {"path": str(target)}, "drafter": {"path": str(drafter), "quantization": "none"},
                "runtime": {"verify_len": dcfg.block_size},
                "trtllm": {"llm_api_options": "trtllm/llm_api_options.yaml"}}
    manifest.update(manifest_over)
    (e / "manifest.json").write_text(json.dumps(manifest))
    return e


def test_engine_dir_reading(tmp_path, make_pair):
    target, drafter = make_pair()
    ed = EngineDir.load(_engine_dir(tmp_path, Path(target), Path(drafter)))
    assert ed.verify_len == ckpt.load_drafter_config(drafter).block_size and ed.quantization == "none"
    assert ed.options["speculative_config"]["speculative_model"] == str(Path(drafter).absolute())
    with pytest.raises(ConfigError, match="not a directory"):
        EngineDir.load(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="'backend' is 'torch'"):
        EngineDir.load(_engine_dir(tmp_path / "t", Path(target), Path(drafter), backend="torch"))
    with pytest.raises(ConfigError, match="trtllm.llm_api_options"):
        EngineDir.load(_engine_dir(tmp_path / "n", Path(target), Path(drafter), trtllm=None))


@pytest.mark.skipif(trtllm_available(), reason="TensorRT-LLM is installed: the real-engine test runs instead")
def test_without_tensorrt_llm_the_backend_says_so(tmp_path, make_pair):
    target, drafter = make_pair()
    engine_dir = _engine_dir(tmp_path, Path(target), Path(drafter))
    with pytest.raises(ConfigError) as err:
        TrtllmEngine.from_engine_dir(engine_dir)
    assert str(err.value) == TRTLLM_MISSING
    assert "\n" not in str(err.value) and "backend torch" in str(err.value) and "Docker" in str(err.value)


@pytest.mark.gpu
def test_real_engine_matches_torch_engine_greedy(tmp_path, make_pair):
    """On a GPU host with TensorRT-LLM: greedy DFlash through TensorRT-LLM gives the target's own greedy tokens (the
    torch engine's AR output) and per-step τ within 1..K. Not run yet: TensorRT-LLM was never available here."""
    pytest.importorskip("tensorrt_llm", reason=TRTLLM_MISSING)
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from dflash_trt.engines.torch_engine import TorchEngine

    target, drafter = make_pair(dtype="bfloat16")
    engine_dir = _engine_dir(tmp_path, Path(target), Path(drafter))
    prompts = [[5, 9, 13, 2], [7, 7, 7]]
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    ref = TorchEngine.from_pretrained(target, drafter, device="cuda", tokenizer=False).generate(
        prompts, params, use_drafter=False)
    with TrtllmEngine.from_engine_dir(engine_dir, tokenizer=False) as engine:
        out = engine.generate(prompts, params)
    for r, o in zip(ref, out):
        # bf16: verify-K and one-token matmuls round differently, so allow a late parting at a near-tie (README)
        assert o.token_ids[:8] == r.token_ids[:8] and len(o.token_ids) == len(r.token_ids)
        assert o.trtllm_metrics["per_step"] and all(1 <= t <= engine.verify_len for t in o.stats.taus)
        assert sum(o.stats.taus) + 1 >= len(o.token_ids)
