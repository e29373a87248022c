"""`dflash-trt bench`: the same prompt batches through the torch engine in AR mode and in DFlash mode, and (greedy,
torch backend) through transformers' own `generate` on the same target as a third baseline.

Per batch the AR run, the spec run and the transformers runs are interleaved (AR, then spec on the same prompts and
per-prompt seeds, then transformers one prompt at a time), so slow drift of the machine (clocks, other load) hits
every mode alike. `warmup` untimed runs of the first batch (transformers: of its first prompt) go first in each
mode. The numbers are computed by dflash_trt.bench.metrics; this module only drives the engines and writes
report.json + the plots.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dflash_trt.bench import metrics
from dflash_trt.bench.datasets import PromptSet, encode_prompt, has_chat_template, load_prompt_sets
from dflash_trt.engines.requests import raise_if_failed
from dflash_trt.errors import ConfigError
from dflash_trt.spec.stats import draft_steps_text

REPORT_JSON = "report.json"
REPORT_VERSION = 2  # 2: settings.verify_len (was block_size), the transformers baseline, notes


@dataclass
class BenchConfig:
    target: str
    drafter: str
    datasets: list[str]
    num_prompts: int | None = None  # per dataset; None = all
    max_new_tokens: int = 256
    batch_size: int = 1
    verify_len: int | None = None  # K, block slots the target verifies per step; None = the drafter's block_size
    draft: str | None = None  # the DFlash mode's draft budget ("chain:K" / "tree:N" / "auto"; torch engine), instead of verify_len
    temperature: float = 0.0
    device: str | None = None  # None = cuda if available
    dtype: str = "auto"
    seed: int = 0  # prompt g (running index over all datasets) samples with seed + g, in both modes
    warmup: int = 1
    output: str = "out/bench"
    max_seq_len: int | None = None  # None: the engine's default (2048, or the target's max_position_embeddings)
    hf_baseline: bool = True  # also time transformers' generate on the target (greedy, torch backend only)
    extra: dict = field(default_factory=dict)

    def validate(self) -> "BenchConfig":
        """Cheap checks before any weights are read; each error names the flag and the fix."""

        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        if not self.datasets:
            raise ConfigError("--dataset is required: pass one or more FastChat-style .jsonl files")
        if self.num_prompts is not None and (not is_int(self.num_prompts) or self.num_prompts < 1):
            raise ConfigError(f"--num-prompts must be an integer >= 1, got {self.num_prompts!r}; omit it to use every prompt")
        if not is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise ConfigError(f"--max-new-tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        if not is_int(self.batch_size) or self.batch_size < 1:
            raise ConfigError(f"--batch-size must be an integer >= 1, got {self.batch_size!r}")
        if self.verify_len is not None and (not is_int(self.verify_len) or self.verify_len < 2):
            raise ConfigError(f"--verify-len must be an integer >= 2 (at most the drafter's block_size), got "
                              f"{self.verify_len!r}; omit it to use the drafter's")
        if not isinstance(self.hf_baseline, bool):
            raise ConfigError(f"hf_baseline must be true or false, got {self.hf_baseline!r}")
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature) or self.temperature < 0:
            raise ConfigError(f"--temperature must be a finite number >= 0 (0 = greedy), got {self.temperature!r}")
        if not is_int(self.seed) or self.seed < 0:
            raise ConfigError(f"--seed must be an integer >= 0, got {self.seed!r}")
        if not is_int(self.warmup) or self.warmup < 0:
            raise ConfigError(f"--warmup must be an integer >= 0 (untimed batches per mode), got {self.warmup!r}")
        if self.max_seq_len is not None and (not is_int(self.max_seq_len) or self.max_seq_len < 2):
            raise ConfigError(f"--max-seq-len must be an integer >= 2, got {self.max_seq_len!r}")
        if self.max_seq_len is not None and self.max_new_tokens >= self.max_seq_len:
            raise ConfigError(f"--max-new-tokens {self.max_new_tokens} leaves no room for a prompt in --max-seq-len "
                              f"{self.max_seq_len}; lower --max-new-tokens or raise --max-seq-len")
        out = Path(self.output)
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--output {str(out)!r} exists and is a file; pass a directory path")
        from dflash_trt.engines.torch_engine import resolve_device, resolve_dtype
        import torch

        resolve_device(self.device)
        resolve_dtype(self.dtype, torch.float32)
        return self


@dataclass
class _Prompt:
    dataset: str
    index: int  # within its dataset
    ids: list[int]
    truncated: bool
    seed: int


def _device_info(engine) -> dict:
    import torch

    dev = engine.device
    info = {"type": dev.type, "index": dev.index}
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info.update(name=torch.cuda.get_device_name(idx), total_memory_gib=round(props.total_memory / 2**30, 1),
                    capability=f"{props.major}.{props.minor}", cuda_version=torch.version.cuda)
    else:
        info.update(name=_cpu_name(), torch_threads=torch.get_num_threads(), cpu_count=os.cpu_count())
    return info


def _verify_bounds(engine, config: "BenchConfig") -> tuple[int | None, int | None]:
    """(largest K the engine verifies, the drafter's block_size B). A TorchEngine: both are its drafter's B. A
    TensorRT-LLM engine fixes K when it is built (`verify_len`); B then comes from its manifest (config.extra)."""
    drafter = getattr(engine, "drafter", None)
    if drafter is not None:
        return drafter.block_size, drafter.block_size
    k = getattr(engine, "verify_len", None)
    return k, config.extra.get("drafter_block_size", k)


HF_TIMING_NOTE = (
    "transformers baseline: AutoModelForCausalLM.from_pretrained(target, dtype=<the engine's dtype>) on the engine's "
    "device, loaded once, without trust_remote_code; generate() greedy (do_sample=False), use_cache=True, the same "
    "prompt token ids and max_new_tokens, stopping at the same ids as our engine (the target's EOS ids plus the "
    "request's stop ids; none when ignore_eos: eos_token_id=None, not min_new_tokens, which would mask EOS and change "
    "the greedy tokens); one prompt at a time (batch 1). Its prefill time is the wall time from the generate() call "
    "until a streamer receives the first new token (generate copies each token to the host before handing it over, "
    "so the device has finished it); decode time is the rest of the call, for new_tokens - 1 tokens. Our modes' "
    "prefill/decode times come from the engine's own clocks around its prefill and decode steps.")


class _FirstTokenClock:
    """A transformers streamer that only notes when the first new token arrives (the prompt is put first)."""

    def __init__(self):
        self.puts = 0
        self.first_token_at: float | None = None

    def put(self, value) -> None:
        self.puts += 1
        if self.puts == 2:  # 1: the prompt ids; 2: the first generated token, already copied to the host
            self.first_token_at = time.perf_counter()

    def end(self) -> None:
        pass


class HfBaseline:
    """transformers' own generate on the target checkpoint: greedy, KV cache on, one prompt at a time."""

    def __init__(self, target_dir: str | os.PathLike, *, dtype, device, eos_token_ids, quiet: bool = False):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, GenerationConfig
        from transformers.utils import logging as hf_logging

        t0 = time.perf_counter()
        bar_was_on = hf_logging.is_progress_bar_enabled()
        if quiet:  # no "Loading weights" bar under --no-progress
            hf_logging.disable_progress_bar()
        try:
            model = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=dtype, trust_remote_code=False)
            model.to(device)
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as err:
            raise ConfigError(f"transformers could not load the target {str(target_dir)!r} for the baseline "
                              f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); pass "
                              "--no-hf-baseline to skip it") from None
        finally:
            if quiet and bar_was_on:
                hf_logging.enable_progress_bar()
        model.eval()
        # Our GenerationConfig is the whole story: nothing from the checkpoint's generation_config.json (sampling
        # defaults, extra EOS ids) fills in what we leave unset.
        model.generation_config = GenerationConfig()
        self.model, self.device, self.eos_token_ids = model, torch.device(device), list(eos_token_ids)
        self._sync()
        self.load_s = time.perf_counter() - t0
        self.info = {"transformers_version": transformers.__version__, "model_class": type(model).__name__,
                     "dtype": str(dtype).removeprefix("torch."), "device": str(self.device),
                     "attn_implementation": getattr(model.config, "_attn_implementation", None),
                     "load_s": self.load_s}

    def _sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def generation_config(self, params):
        """greedy, use_cache, max_new_tokens, and our engine's stop ids (params.stop_token_ids + EOS unless ignore_eos)."""
        from transformers import GenerationConfig

        from dflash_trt.engines.requests import stop_token_ids

        stops = stop_token_ids(params, self.eos_token_ids)
        return GenerationConfig(max_new_tokens=params.max_new_tokens, do_sample=False, use_cache=True,
                                eos_token_id=stops or None, pad_token_id=stops[0] if stops else None)

    def generate(self, ids: list[int], params) -> tuple[list[int], metrics.BatchTiming]:
        """One prompt's new token ids and its timing (prefill = until the first new token reached the host)."""
        import torch

        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        mask = torch.ones_like(input_ids)
        config, clock = self.generation_config(params), _FirstTokenClock()
        self._sync()
        t0 = time.perf_counter()
        out = self.model.generate(input_ids, attention_mask=mask, generation_config=config, streamer=clock)
        self._sync()
        t1 = time.perf_counter()
        tokens = out[0, len(ids):].tolist()
        first = clock.first_token_at if clock.first_token_at is not None else t1
        new = len(tokens)
        return tokens, metrics.BatchTiming(prefill_s=first - t0, decode_s=t1 - first, decode_tokens=max(new - 1, 0),
                                           new_tokens=new, sequences=1)

    def close(self) -> None:
        import torch

        self.model = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def hf_skip_reason(config: "BenchConfig", engine) -> str | None:
    """Why the transformers baseline does not run here (None: it runs)."""
    if not config.hf_baseline:
        return "disabled (--no-hf-baseline)"
    if config.temperature != 0:
        return (f"temperature {config.temperature} > 0: transformers samples with its own random numbers, so its "
                "tokens are not comparable with ours; the baseline runs only greedy (--temperature 0)")
    if getattr(engine, "target", None) is None:
        return (f"backend {config.extra.get('backend') or type(engine).__name__}: the transformers baseline runs only "
                "next to the torch engine")
    if not config.target or not Path(config.target).is_dir():
        return f"the target checkpoint directory {config.target!r} is not a directory transformers can load"
    return None


def _dtype_name(engine) -> str:
    target = getattr(engine, "target", None)
    return str(target.lm_head.weight.dtype).removeprefix("torch.") if target is not None else str(engine.dtype_name)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _clean(obj):
    """JSON-safe: non-finite floats become null (json would write NaN / Infinity, which is not JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _batches(items: list, size: int) -> list[list]:
    return [items[i: i + size] for i in range(0, len(items), size)]


def run_bench(config: BenchConfig, *, engine=None, progress: bool = True, write: bool = True) -> dict:
    """Run the benchmark; return the report (and write report.json + plots into config.output if `write`).

    `engine` (a TorchEngine with a drafter) may be passed to reuse loaded models; its max_batch_size must be >=
    config.batch_size and its max_seq_len is then used instead of config.max_seq_len. With config.hf_baseline,
    temperature 0 and a torch engine, transformers' generate on config.target runs as a third mode."""
    import torch
    from tqdm import tqdm

    from dflash_trt.spec.sampling import SamplingParams

    config.validate()
    sets: list[PromptSet] = load_prompt_sets(config.datasets, config.num_prompts)
    out_dir = Path(config.output)
    if write:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(f"--output {str(out_dir)!r} cannot be created ({err.strerror}); pass a writable directory") from None

    if engine is None:
        from dflash_trt.engines.torch_engine import TorchEngine

        engine = TorchEngine.from_pretrained(config.target, config.drafter, device=config.device, dtype=config.dtype,
                                             max_batch_size=config.batch_size, max_seq_len=config.max_seq_len)
    max_k, drafter_block = _verify_bounds(engine, config)
    if max_k is None:
        raise ConfigError("bench compares DFlash with AR and needs a drafter: pass --drafter DIR")
    if engine.max_batch_size < config.batch_size:
        raise ConfigError(f"--batch-size {config.batch_size} exceeds the engine's max_batch_size {engine.max_batch_size}")
    draft, verify_len = None, config.verify_len  # draft: "auto" / "tree:N", or None (chain:K = verify_len K)
    if config.draft is not None:
        if getattr(engine, "draft_budget", None) is None or getattr(engine, "drafter", None) is None:
            raise ConfigError("--draft needs the torch engine with a drafter; give --verify-len K for this engine")
        from dflash_trt.engines.requests import resolve_draft

        kind, k_draft = resolve_draft(config.draft, config.verify_len, engine.drafter.block_size)
        if kind == "chain":
            verify_len = k_draft
        else:
            draft, verify_len = ("auto" if kind == "auto" else f"tree:{k_draft}"), None
    k = max_k if verify_len is None else verify_len
    if not 2 <= k <= max_k:
        what = "the drafter's block_size" if getattr(engine, "drafter", None) is not None else "the engine's verify_len"
        raise ConfigError(f"--verify-len must be in 2..{max_k} ({what}), got {k}; omit it to use {max_k}")
    max_seq_len = engine.max_seq_len
    if config.max_new_tokens >= max_seq_len:
        raise ConfigError(f"--max-new-tokens {config.max_new_tokens} leaves no room for a prompt in max_seq_len "
                          f"{max_seq_len}; lower --max-new-tokens or raise --max-seq-len")

    # ---- prompts: formatted, tokenized, left-truncated; one fixed seed each, shared by every mode ------------------
    tokenizer = engine.tokenizer
    prompts: dict[str, list[_Prompt]] = {}
    g = 0
    for s in sets:
        rows = []
        for i, turn in enumerate(s.turns):
            ids, truncated = encode_prompt(tokenizer, turn, max_seq_len - config.max_new_tokens)
            rows.append(_Prompt(s.name, i, ids, truncated, config.seed + g))
            g += 1
        prompts[s.name] = rows

    def params(batch: list[_Prompt]) -> list[SamplingParams]:
        return [SamplingParams(max_new_tokens=config.max_new_tokens, temperature=float(config.temperature),
                               seed=p.seed) for p in batch]

    # ---- the transformers baseline: loaded once, before any timing --------------------------------------------------
    hf_skip = hf_skip_reason(config, engine)
    hf: HfBaseline | None = None
    if hf_skip is None:
        hf = HfBaseline(config.target, dtype=engine.target.lm_head.weight.dtype, device=engine.device,
                        eos_token_ids=engine.target.cfg.eos_token_ids, quiet=not progress)

    def budget(spec: bool) -> dict:
        """A mode's draft arguments: AR, the chain of K, or `draft` (auto / a tree)."""
        return {"draft": draft} if spec and draft is not None else {"verify_len": k if spec else None}

    def run(batch: list[_Prompt], mode: str) -> tuple[list, list[metrics.BatchTiming]]:
        """(results, timings) of one batch in one mode: one engine call (one timing), or transformers prompt by prompt."""
        if mode == "hf":
            outs = [hf.generate(p.ids, q) for p, q in zip(batch, params(batch))]
            return [tokens for tokens, _ in outs], [timing for _, timing in outs]
        spec = mode == "spec"
        results = raise_if_failed(engine.generate([p.ids for p in batch], params(batch), use_drafter=spec, **budget(spec)),
                                  f"bench ({mode})")
        return results, [metrics.batch_timing([r.stats for r in results])]

    # ---- every step shape of both modes captured before any timing (CUDA graphs; none elsewhere), as the servers
    # capture them at start: a shape's first use inside a timed batch (its eager run and capture) is a one-off per
    # process, and auto meets more shapes than a fixed chain (on an H200 its first uses were 2-5 % of its time at
    # batch 8-16, 2026-11-27). Engines without our scheduler (TensorRT-LLM) capture their own.
    up_front = 0
    if getattr(engine, "new_scheduler", None) is not None:
        for spec in (False, True):
            up_front += engine.new_scheduler(use_drafter=spec, **budget(spec)).capture_graphs()[0]

    # ---- the runs: each batch in AR and DFlash mode (and transformers), interleaved (same conditions for all); an
    # engine that switches modes slowly (`phased`: TensorRT-LLM builds one LLM per mode) runs all AR batches, then all
    # DFlash ones. Each mode is warmed up (untimed, first batch; transformers: its first prompt) right before its
    # first timed batch.
    modes = ("ar", "spec", "hf") if hf is not None else ("ar", "spec")
    first_batch = prompts[sets[0].name][: config.batch_size]
    warm_batch = {"ar": first_batch, "spec": first_batch, "hf": first_batch[:1]}
    jobs = [(s.name, batch, mode) for s in sets for batch in _batches(prompts[s.name], config.batch_size)
            for mode in modes]
    if getattr(engine, "phased", False):
        jobs.sort(key=lambda job: modes.index(job[2]))  # stable: batch order is kept within each mode
    total = sum(len(v) for v in prompts.values())
    label = {"ar": "ar", "spec": "dflash", "hf": "transformers"}
    bar = tqdm(total=len(modes) * total + config.warmup * sum(len(warm_batch[m]) for m in modes), unit="seq",
               desc="bench", disable=not progress, dynamic_ncols=True, file=sys.stderr)
    runs: dict[str, dict] = {s.name: {f"{m}_{part}": [] for m in ("ar", "spec", "hf") for part in ("timings", "results")}
                             for s in sets}
    warm: dict[str, float] = {}  # mode -> seconds of its untimed warm-up runs (with --compile: compiling, mostly)
    try:
        for name, batch, mode in jobs:
            if mode not in warm:
                t0 = time.perf_counter()
                for _ in range(config.warmup):
                    bar.set_description(f"warmup {label[mode]}")
                    run(warm_batch[mode], mode)
                    bar.update(len(warm_batch[mode]))
                warm[mode] = time.perf_counter() - t0
            rec = runs[name]
            bar.set_description(f"{name} {label[mode]}")
            results, timings = run(batch, mode)
            rec[f"{mode}_timings"].extend(timings)
            rec[f"{mode}_results"].extend(results)
            bar.update(len(batch))
            taus = [t for r in rec["spec_results"] for t in r.stats.taus]
            if taus:
                bar.set_postfix(tau=f"{sum(taus) / len(taus):.2f}")
    finally:
        bar.close()
        if hf is not None:
            hf.close()

    # ---- report ---------------------------------------------------------------------------------------------------
    def group(recs: list[dict]) -> dict:
        ar_res = [r for rec in recs for r in rec["ar_results"]]
        sp_res = [r for rec in recs for r in rec["spec_results"]]
        hf_kw = {}
        if hf is not None:
            hf_kw = {"hf_timings": [t for rec in recs for t in rec["hf_timings"]],
                     "hf_outputs": [t for rec in recs for t in rec["hf_results"]]}
        return metrics.summarize([t for rec in recs for t in rec["ar_timings"]],
                                 [t for rec in recs for t in rec["spec_timings"]],
                                 [r.stats for r in sp_res], [r.token_ids for r in ar_res],
                                 [r.token_ids for r in sp_res], verify_len=k, **hf_kw)

    datasets_out = {}
    for s in sets:
        rec, rows = runs[s.name], prompts[s.name]
        d = group([rec])
        d["path"] = str(s.path)
        d["prompts_truncated"] = sum(p.truncated for p in rows)
        d["mean_prompt_tokens"] = sum(len(p.ids) for p in rows) / len(rows)
        d["batch_timings"] = [{"ar": asdict(a), "spec": asdict(b)} for a, b in zip(rec["ar_timings"], rec["spec_timings"])]
        if hf is not None:
            d["hf_prompt_timings"] = [asdict(t) for t in rec["hf_timings"]]
        hf_tokens = rec["hf_results"] if hf is not None else [None] * len(rows)
        d["per_prompt"] = [
            {"prompt": p.index, "seed": p.seed, "prompt_tokens": len(p.ids), "truncated": p.truncated,
             "new_tokens_ar": a.stats.new_tokens, "new_tokens_spec": r.stats.new_tokens,
             "new_tokens_hf": None if h is None else len(h),
             "finish_reason": r.finish_reason, "steps": r.stats.steps,
             "mean_tau": r.stats.mean_tau if r.stats.steps else None, "match_ar": a.token_ids == r.token_ids,
             "hf_match_ar": None if h is None else a.token_ids == h}
            for p, a, r, h in zip(rows, rec["ar_results"], rec["spec_results"], hf_tokens)]
        datasets_out[s.name] = d
    overall = group([runs[s.name] for s in sets])
    overall["datasets"] = [s.name for s in sets]

    notes = [
        "decode-only (every mode): TPOT = sum(decode_s) / sum(new_tokens - 1) over the mode's generate calls (the "
        "first token comes from prefill); decode tok/s = 1 / TPOT; speedup = TPOT_AR / TPOT_spec; efficiency = "
        "speedup / mean_tau",
        "end-to-end (every mode, one definition): e2e tok/s = sum(new_tokens) / sum(prefill_s + decode_s) over the "
        "mode's generate calls (prefill and first token included); e2e_speedup = e2e_spec / e2e_AR",
    ]
    hf_section = {"ran": hf is not None, "skipped": hf_skip, "batch_size": 1}
    if hf is not None:
        hf_section.update(hf.info)
        hf_section["generate"] = {"do_sample": False, "use_cache": True, "max_new_tokens": config.max_new_tokens,
                                  "eos_token_id": list(engine.target.cfg.eos_token_ids) or None, "streamer": True}
        notes.append(HF_TIMING_NOTE)
        notes.append("speedup_ar_vs_hf / speedup_spec_vs_hf = TPOT_HF / TPOT_mode (decode-only); e2e_speedup_*_vs_hf "
                     "= e2e_mode / e2e_HF; hf_num_match_ar = prompts whose transformers greedy tokens equal our AR "
                     "tokens")
        if config.batch_size > 1:
            hf_section["note"] = (f"--batch-size {config.batch_size}: our AR and DFlash modes ran batches of "
                                  f"{config.batch_size}, transformers ran one prompt at a time (batch 1); the ratios "
                                  "against it compare our batched throughput with its batch-1 throughput")
            notes.append(hf_section["note"])
    else:
        notes.append(f"transformers baseline skipped: {hf_skip}")

    from dflash_trt import __version__

    report = {
        "report_version": REPORT_VERSION,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "dflash_trt_version": __version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": _device_info(engine),
        "settings": {
            "target": str(config.target), "drafter": str(config.drafter),
            "datasets": [str(s.path) for s in sets], "num_prompts": config.num_prompts,
            "max_new_tokens": config.max_new_tokens, "batch_size": config.batch_size, "verify_len": k,
            "draft": draft or f"chain:{k}",
            "drafter_block_size": drafter_block, "temperature": float(config.temperature), "seed": config.seed,
            "warmup": config.warmup, "max_seq_len": max_seq_len,
            "dtype": _dtype_name(engine), "dtype_arg": config.dtype,
            "device_arg": config.device, "chat_template": has_chat_template(tokenizer),
            "hf_baseline": config.hf_baseline,
            "warmup_s": {label[m]: round(s, 3) for m, s in warm.items()},
            "graphs_captured_up_front": up_front,
            "timing": "decode-only: TPOT = sum(batch decode_s) / sum(new_tokens - 1); speedup = TPOT_AR / TPOT_spec; "
                      "efficiency = speedup / mean_tau; e2e tok/s = sum(new_tokens) / sum(prefill_s + decode_s)",
            **config.extra,
        },
        "hf_baseline": hf_section,
        "notes": notes,
        "datasets": datasets_out,
        "overall": overall,
    }
    report = _clean(report)
    if write:
        from dflash_trt.bench.plots import write_plots

        files = {"report": str(out_dir / REPORT_JSON)}
        files.update({name: str(p) for name, p in write_plots(report, out_dir).items()})
        report["files"] = files
        tmp = out_dir / (REPORT_JSON + ".tmp")
        tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out_dir / REPORT_JSON)
    return report


# ---- terminal table ---------------------------------------------------------------------------------------------------


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _draft_title(settings: dict) -> str:
    draft = settings.get("draft")
    if draft == "auto":
        return f"draft=auto (K <= {_verify_len_setting(settings)})"
    if draft and draft.startswith("tree:"):
        return f"draft={draft}"
    return f"K={_verify_len_setting(settings)}"


def _verify_len_setting(settings: dict):
    """K from a report's settings (reports before version 2 called it block_size)."""
    return settings.get("verify_len", settings.get("block_size"))


def _ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def format_modes(report: dict) -> list[str]:
    """The overall numbers of each mode, one row each: ours AR, ours DFlash and (when it ran) transformers."""
    o = report["overall"]
    hf_info = report.get("hf_baseline") or {}
    header = ["mode (overall)", "decode tok/s", "TPOT ms", "e2e tok/s", "decode vs HF", "e2e vs HF", "tokens = AR"]

    def ms(v):
        return _fmt(None if v is None else v * 1e3, ".2f")

    ran = bool(hf_info.get("ran")) and o.get("hf") is not None
    rows = [
        ["ours AR", _fmt(o.get("tokens_per_s_ar"), ".1f"), ms(o.get("tpot_ar_s")), _fmt(o.get("e2e_tokens_per_s_ar"), ".1f"),
         _ratio(o.get("speedup_ar_vs_hf")), _ratio(o.get("e2e_speedup_ar_vs_hf")), "(reference)"],
        ["ours DFlash", _fmt(o.get("tokens_per_s_spec"), ".1f"), ms(o.get("tpot_spec_s")),
         _fmt(o.get("e2e_tokens_per_s_spec"), ".1f"), _ratio(o.get("speedup_spec_vs_hf")),
         _ratio(o.get("e2e_speedup_spec_vs_hf")), f"{o.get('num_match_ar')}/{o.get('num_prompts')}"],
    ]
    if ran:
        rows.append(["transformers (batch 1)", _fmt(o.get("tokens_per_s_hf"), ".1f"), ms(o.get("tpot_hf_s")),
                     _fmt(o.get("e2e_tokens_per_s_hf"), ".1f"), "1.00x", "1.00x",
                     f"{o.get('hf_num_match_ar')}/{o.get('num_prompts')}"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]
    settings = report.get("settings") or {}
    if settings.get("compile"):
        warm = ", ".join(f"{m} {s:.1f} s" for m, s in (settings.get("warmup_s") or {}).items())
        out.append(f"torch.compile: untimed warm-up per mode (compiling, mostly): {warm or 'none (--warmup 0)'}")
    if not ran:
        out.append(f"transformers baseline: skipped ({hf_info.get('skipped') or 'not in this report'})")
    elif hf_info.get("note"):
        out.append(f"note: {hf_info['note']}")
    return out


def format_table(report: dict) -> str:
    """A plain-text table: one row per dataset and an overall row; then one row per mode (AR, DFlash, transformers)."""
    header = ["dataset", "prompts", "mean τ", "AR tok/s", "DFlash tok/s", "TPOT AR ms", "TPOT DF ms", "speedup",
              "efficiency", "match AR"]
    rows = []
    items = list(report["datasets"].items()) + [("overall", report["overall"])]
    for name, d in items:
        tp_ar, tp_sp = d.get("tpot_ar_s"), d.get("tpot_spec_s")
        rows.append([
            name, str(d["num_prompts"]), _fmt(d["mean_tau"], ".2f"), _fmt(d["tokens_per_s_ar"], ".1f"),
            _fmt(d["tokens_per_s_spec"], ".1f"), _fmt(None if tp_ar is None else tp_ar * 1e3, ".2f"),
            _fmt(None if tp_sp is None else tp_sp * 1e3, ".2f"), _fmt(d["speedup"], ".2f") + ("x" if d["speedup"] else ""),
            _fmt(d["efficiency"], ".2f"),
            "yes" if d["all_match_ar"] else f"NO ({d['num_match_ar']}/{d['num_prompts']})",
        ])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    sep = "  ".join("-" * w for w in widths)
    s = report.get("settings", {})
    dev = report.get("device", {})
    title = (f"dflash-trt bench  device={dev.get('type')} ({dev.get('name')})  dtype={s.get('dtype')}  "
             f"{_draft_title(s)}"
             f"  T={s.get('temperature')}  batch={s.get('batch_size')}  "
             f"max_new_tokens={s.get('max_new_tokens')}  torch {report.get('torch_version')}")
    out = [title, line(header), sep]
    out += [line(r) for r in rows[:-1]]
    out += [sep, line(rows[-1])]
    acc = report["overall"].get("per_position_acceptance") or []
    out.append("acceptance per position (overall): " + " ".join(f"{a:.2f}" for a in acc))
    out.append(f"τ histogram (overall, τ=1..{len(report['overall'].get('histogram', []))}): "
               f"{report['overall'].get('histogram')}")
    drafts = report["overall"].get("draft_steps") or {}
    if len(drafts) > 1:  # a budget that chose per window (auto): what it chose
        out.append(f"steps by draft (overall): {draft_steps_text(drafts)}")
    out.append("")
    out += format_modes(report)
    return "\n".join(out)
