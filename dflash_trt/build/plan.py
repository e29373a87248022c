"""Everything `dflash-trt build` can check before it reads a weight: the plan.

`make_plan` reads the two config.json files and the prompt files, checks the pair, the backend, the devices and the
output directory, and returns the resolved settings the builder follows. It takes well under a second: a bad config
fails here, before minutes of loading and calibrating.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from dflash_trt import checkpoint as ckpt
from dflash_trt.build.config import BuildConfig
from dflash_trt.errors import CheckpointError, ConfigError
from dflash_trt.manifest import load_manifest


@dataclass
class PromptSlice:
    """Lines [start, start + count) of a FastChat JSONL file (their first turns)."""

    path: Path
    start: int
    count: int
    turns: list[str] = field(default_factory=list, repr=False)


@dataclass
class BuildPlan:
    config: BuildConfig
    output: Path
    target: "ckpt.TargetConfig | ckpt.TargetSummary"
    torch_runs_target: bool  # our torch engine can run this target (needed for backend torch and for quantization)
    drafter: ckpt.DrafterConfig
    verify_len: int  # K, block slots verified per step
    build_device: str  # where calibration and the gate run ("cpu" / "cuda[:N]")
    dtype: str  # resolved model dtype name ("float32" | "bfloat16" | "float16")
    calibration: Optional[PromptSlice] = None
    gate: Optional[PromptSlice] = None
    min_compute_capability: Optional[tuple[int, int]] = None

    @property
    def quantization(self) -> str:
        return self.config.quantization.format


def _cuda_capability(device: str) -> Optional[tuple[int, int]]:
    import torch

    if not torch.cuda.is_available():
        return None
    index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
    return tuple(torch.cuda.get_device_capability(index))


def _resolve_build_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"field 'device' is {device} but this machine has no CUDA GPU (torch.cuda.is_available() "
                              "is False): set device: cpu (or auto), or build on a GPU host")
        if ":" in device and int(device.split(":")[1]) >= torch.cuda.device_count():
            raise ConfigError(f"field 'device' is {device} but there are {torch.cuda.device_count()} GPU(s): use "
                              f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    return device


def _prompt_slice(path: Path, start: int, count: int, what: str) -> PromptSlice:
    from dflash_trt.bench.datasets import DatasetError, load_prompt_set

    try:
        turns = load_prompt_set(path, start + count).turns
    except DatasetError as err:  # its message names --dataset; name the config field instead
        raise ConfigError(f"field '{what}': {str(err).replace('--dataset ', '')}") from None
    if len(turns) < start + count:
        have = max(len(turns) - start, 0)
        raise ConfigError(f"field '{what}': {path} has {len(turns)} prompts; {count} are needed after the first "
                          f"{start} (only {have} left): lower the count or give another prompt file")
    return PromptSlice(path, start, count, turns[start:])


THIS_MACHINE = "this machine"


def make_plan(config: BuildConfig, *, force: bool = False,
              compute_capability: "tuple[int, int] | None | str" = THIS_MACHINE) -> BuildPlan:
    """Check `config` against the checkpoints and this machine. compute_capability: the GPU the engine is checked
    against for backend trtllm (default: this machine's first CUDA GPU, None when it has none)."""
    q = config.quantization
    output = Path(config.output)
    if output.exists() and not force:
        raise ConfigError(f"output {output} already exists: pass --force to replace it (it is replaced only when the "
                          "new build succeeds), or choose another --output")
    if output.exists() and not output.is_dir():
        raise ConfigError(f"output {output} exists and is a file: choose a directory path")
    for src in (config.target, config.drafter):
        out, inp = output.resolve(), Path(src).resolve()
        if out == inp or inp in out.parents:
            raise ConfigError(f"output {output} is inside the checkpoint {src}: write the engine somewhere else")
        if out in inp.parents:  # replacing the output would delete the build's own input
            raise ConfigError(f"output {output} contains the checkpoint {src}, which --force would delete: write the "
                              "engine somewhere else")
    if output.exists() and any(output.iterdir()):  # --force replaces only what dflash-trt build wrote (or nothing)
        try:
            load_manifest(output)
        except ConfigError as err:
            raise ConfigError(f"output {output} exists and is not an engine directory written by dflash-trt build "
                              f"({err}); --force replaces only those: choose another --output, or remove it yourself "
                              "if it is yours to delete") from None

    drafter = ckpt.load_drafter_config(config.drafter)
    needs_torch_target = config.backend == "torch" or q.format != "none"
    try:
        target = ckpt.load_target_config(config.target)
        torch_runs_target = True
    except CheckpointError as err:
        if needs_torch_target:
            why = ("backend torch runs it" if config.backend == "torch" else
                   f"quantization.format {q.format} calibrates the drafter on the target's real hidden states, which "
                   "dflash-trt's torch engine computes")
            raise CheckpointError(f"{err} [{why}; it runs Qwen3, Llama, gpt-oss, Qwen3-MoE and Gemma 4 targets: use "
                                  "backend trtllm with quantization.format none for other targets]") from None
        target = ckpt.load_target_summary(config.target)
        torch_runs_target = False
    ckpt.check_pair(target, drafter, config.drafter)
    if drafter.dflash2 and (config.backend != "torch" or q.format != "none"):
        # TensorRT-LLM's DFlash drafter has no convolutions nor selector, and the ModelOpt export writes no selector
        raise ConfigError(f"the drafter {config.drafter} is a DFlash2 drafter (DFlash2DraftModel), which only backend "
                          f"torch with quantization.format none runs; got backend {config.backend}, quantization.format "
                          f"{q.format}")

    if q.format != "none" and drafter.quantization != "none":
        raise ConfigError(f"field 'quantization.format' is {q.format} but the drafter {config.drafter} is already "
                          f"{drafter.quantization}-quantized: point 'drafter' at the unquantized checkpoint or set "
                          "quantization.format: none")
    k = drafter.block_size if config.verify_len is None else config.verify_len
    if not 2 <= k <= drafter.block_size:
        raise ConfigError(f"field 'verify_len' is {k}; it must be in 2..{drafter.block_size} (the drafter's trained "
                          "block_size): lower it or remove it")
    if config.draft is not None:
        from dflash_trt.engines.requests import resolve_draft
        from dflash_trt.errors import RequestError

        try:
            # auto and trees run K up to the drafter's block: a verify_len equal to it (the default) says the same
            whole_block = (config.draft.strip().partition(":")[0] in ("auto", "tree")
                           and config.verify_len == drafter.block_size)
            kind, k_draft = resolve_draft(config.draft, None if whole_block else config.verify_len, drafter.block_size)
        except RequestError as err:
            raise ConfigError(f"field 'draft': {err}") from None
        if kind == "chain":
            k = k_draft  # a tree's N counts nodes: verify_len stays the chain's K (the gate, TensorRT-LLM)
        if kind in ("auto", "tree") and config.backend == "trtllm":
            raise ConfigError(f"field 'draft' is {config.draft.strip()!r}, which the torch engine runs; TensorRT-LLM "
                              "verifies a fixed max_draft_len chain: use 'chain:K' or verify_len with backend trtllm")

    dtype = config.dtype
    if dtype == "auto":
        dtype = str(target.dtype).removeprefix("torch.") if torch_runs_target else "auto"
    if config.backend == "trtllm" and dtype == "float32":
        raise ConfigError("field 'dtype': the target checkpoint is float32 and backend trtllm serves 16-bit models: "
                          "set dtype: bfloat16")

    build_device = _resolve_build_device(config.device)
    min_cc = None
    if config.backend == "trtllm":
        from dflash_trt.engines.trtllm_options import check_trtllm_requirements

        if compute_capability == THIS_MACHINE:
            compute_capability = _cuda_capability(build_device if build_device.startswith("cuda") else "cuda")
        # On a GPU build host the engine is checked against that GPU (NVFP4 below sm_100 fails here); a CPU host
        # records the least capability in the manifest for `doctor` on the serving machine.
        min_cc = check_trtllm_requirements(q.format if drafter.quantization == "none" else drafter.quantization,
                                           compute_capability, None if dtype == "auto" else dtype)

    calibration = gate = None
    if q.format != "none":
        from dflash_trt.checkpoint import load_tokenizer

        if load_tokenizer(config.target) is None:
            raise ConfigError(f"quantization needs the target's tokenizer to encode the calibration prompts, and "
                              f"{config.target} has none: add its tokenizer files")
        cal = q.calibration
        calibration = _prompt_slice(cal.prompts, 0, cal.num_samples, "quantization.calibration.prompts")
        gate_path = q.gate.prompts or cal.prompts
        # The gate's prompts are held out: from the calibration file, the ones after the calibration samples.
        skip = cal.num_samples if Path(gate_path).resolve() == Path(cal.prompts).resolve() else 0
        gate = _prompt_slice(gate_path, skip, q.gate.num_prompts, "quantization.gate.prompts")
    return BuildPlan(config=config, output=output, target=target, torch_runs_target=torch_runs_target,
                     drafter=drafter, verify_len=k, build_device=build_device, dtype=dtype, calibration=calibration,
                     gate=gate, min_compute_capability=min_cc)


def describe(plan: BuildPlan) -> str:
    c = plan.config
    quant = plan.quantization if plan.quantization != "none" else f"none (drafter {plan.drafter.quantization})"
    return (f"backend {c.backend}, target {c.target}, drafter {c.drafter} ({plan.drafter.num_hidden_layers} layers, "
            f"block {plan.drafter.block_size}, verify K={plan.verify_len}), quantization {quant}, dtype {plan.dtype}, "
            f"build device {plan.build_device} -> {plan.output}")


def checkpoint_files(directory: str | os.PathLike) -> list[Path]:
    """The files of a checkpoint directory worth copying or hashing (configs, weights, tokenizer), sorted."""
    d = Path(directory)
    keep = (".json", ".safetensors", ".jinja", ".txt", ".model")
    return sorted(p for p in d.iterdir() if p.is_file() and p.suffix in keep)
