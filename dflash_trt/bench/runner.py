"""`dflash-trt bench`: the same prompt batches through the torch engine in AR mode and in DFlash mode.

Per batch the AR run and the spec run are interleaved (AR then spec on the same prompts and per-prompt seeds), so
slow drift of the machine (clocks, other load) hits both modes alike. `warmup` untimed runs of the first batch go
first in each mode. The numbers are computed by dflash_trt.bench.metrics; this module only drives the engine and
writes report.json + the plots.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dflash_trt.bench import metrics
from dflash_trt.bench.datasets import PromptSet, encode_prompt, has_chat_template, load_prompt_sets
from dflash_trt.errors import ConfigError

REPORT_JSON = "report.json"
REPORT_VERSION = 1


@dataclass
class BenchConfig:
    target: str
    drafter: str
    datasets: list[str]
    num_prompts: int | None = None  # per dataset; None = all
    max_new_tokens: int = 256
    batch_size: int = 1
    block_size: int | None = None  # K verified slots; None = the drafter's block size
    temperature: float = 0.0
    device: str | None = None  # None = cuda if available
    dtype: str = "auto"
    seed: int = 0  # prompt g (running index over all datasets) samples with seed + g, in both modes
    warmup: int = 1
    output: str = "out/bench"
    max_seq_len: int = 4096
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
        if self.block_size is not None and (not is_int(self.block_size) or self.block_size < 2):
            raise ConfigError(f"--block-size must be an integer >= 2 (at most the drafter's block_size), got "
                              f"{self.block_size!r}; omit it to use the drafter's")
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature) or self.temperature < 0:
            raise ConfigError(f"--temperature must be a finite number >= 0 (0 = greedy), got {self.temperature!r}")
        if not is_int(self.seed) or self.seed < 0:
            raise ConfigError(f"--seed must be an integer >= 0, got {self.seed!r}")
        if not is_int(self.warmup) or self.warmup < 0:
            raise ConfigError(f"--warmup must be an integer >= 0 (untimed batches per mode), got {self.warmup!r}")
        if not is_int(self.max_seq_len) or self.max_seq_len < 2:
            raise ConfigError(f"--max-seq-len must be an integer >= 2, got {self.max_seq_len!r}")
        if self.max_new_tokens >= self.max_seq_len:
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


def _drafter_block(engine) -> int | None:
    """The drafter's block size (the largest K): a TorchEngine's drafter, or what a TensorRT-LLM engine was built for."""
    drafter = getattr(engine, "drafter", None)
    return drafter.block_size if drafter is not None else getattr(engine, "drafter_block_size", None)


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
    config.batch_size and its max_seq_len is then used instead of config.max_seq_len."""
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
    drafter_block = _drafter_block(engine)
    if drafter_block is None:
        raise ConfigError("bench compares DFlash with AR and needs a drafter: pass --drafter DIR")
    if engine.max_batch_size < config.batch_size:
        raise ConfigError(f"--batch-size {config.batch_size} exceeds the engine's max_batch_size {engine.max_batch_size}")
    k = drafter_block if config.block_size is None else config.block_size
    if not 2 <= k <= drafter_block:
        raise ConfigError(f"--block-size must be in 2..{drafter_block} (the drafter's block_size), got {k}; "
                          f"omit it to use {drafter_block}")
    max_seq_len = engine.max_seq_len
    if config.max_new_tokens >= max_seq_len:
        raise ConfigError(f"--max-new-tokens {config.max_new_tokens} leaves no room for a prompt in max_seq_len "
                          f"{max_seq_len}; lower --max-new-tokens or raise --max-seq-len")

    # ---- prompts: formatted, tokenized, left-truncated; one fixed seed each, shared by both modes ----------------
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

    def generate(batch: list[_Prompt], spec: bool):
        return engine.generate([p.ids for p in batch], params(batch), block_size=k if spec else None,
                               use_drafter=spec)

    # ---- the runs: each batch in AR and DFlash mode, interleaved (same conditions for both); an engine that
    # switches modes slowly (`phased`: TensorRT-LLM builds one LLM per mode) runs all AR batches, then all DFlash ones.
    # Each mode is warmed up (untimed, first batch) right before its first timed batch.
    first_batch = prompts[sets[0].name][: config.batch_size]
    jobs = [(s.name, batch, spec) for s in sets for batch in _batches(prompts[s.name], config.batch_size)
            for spec in (False, True)]
    if getattr(engine, "phased", False):
        jobs.sort(key=lambda job: job[2])  # stable: batch order is kept within each mode
    total = sum(len(v) for v in prompts.values())
    bar = tqdm(total=2 * total + 2 * config.warmup * len(first_batch), unit="seq", desc="bench", disable=not progress,
               dynamic_ncols=True, file=sys.stderr)
    runs: dict[str, dict] = {s.name: {"ar_timings": [], "spec_timings": [], "ar_results": [], "spec_results": []}
                             for s in sets}
    warm: set[bool] = set()
    try:
        for name, batch, spec in jobs:
            if spec not in warm:
                warm.add(spec)
                for _ in range(config.warmup):
                    bar.set_description(f"warmup {'dflash' if spec else 'ar'}")
                    generate(first_batch, spec)
                    bar.update(len(first_batch))
            rec, key = runs[name], "spec" if spec else "ar"
            bar.set_description(f"{name} {'dflash' if spec else 'ar'}")
            results = generate(batch, spec)
            rec[f"{key}_timings"].append(metrics.batch_timing([r.stats for r in results]))
            rec[f"{key}_results"].extend(results)
            bar.update(len(batch))
            taus = [t for r in rec["spec_results"] for t in r.stats.taus]
            if taus:
                bar.set_postfix(tau=f"{sum(taus) / len(taus):.2f}")
    finally:
        bar.close()

    # ---- report ---------------------------------------------------------------------------------------------------
    def group(recs: list[dict]) -> dict:
        ar_res = [r for rec in recs for r in rec["ar_results"]]
        sp_res = [r for rec in recs for r in rec["spec_results"]]
        return metrics.summarize([t for rec in recs for t in rec["ar_timings"]],
                                 [t for rec in recs for t in rec["spec_timings"]],
                                 [r.stats for r in sp_res], [r.token_ids for r in ar_res],
                                 [r.token_ids for r in sp_res], block_size=k)

    datasets_out = {}
    for s in sets:
        rec, rows = runs[s.name], prompts[s.name]
        d = group([rec])
        d["path"] = str(s.path)
        d["prompts_truncated"] = sum(p.truncated for p in rows)
        d["mean_prompt_tokens"] = sum(len(p.ids) for p in rows) / len(rows)
        d["batch_timings"] = [{"ar": asdict(a), "spec": asdict(b)} for a, b in zip(rec["ar_timings"], rec["spec_timings"])]
        d["per_prompt"] = [
            {"prompt": p.index, "seed": p.seed, "prompt_tokens": len(p.ids), "truncated": p.truncated,
             "new_tokens_ar": a.stats.new_tokens, "new_tokens_spec": r.stats.new_tokens,
             "finish_reason": r.finish_reason, "steps": r.stats.steps,
             "mean_tau": r.stats.mean_tau if r.stats.steps else None, "match_ar": a.token_ids == r.token_ids}
            for p, a, r in zip(rows, rec["ar_results"], rec["spec_results"])]
        datasets_out[s.name] = d
    overall = group([runs[s.name] for s in sets])
    overall["datasets"] = [s.name for s in sets]

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
            "max_new_tokens": config.max_new_tokens, "batch_size": config.batch_size, "block_size": k,
            "drafter_block_size": drafter_block, "temperature": float(config.temperature), "seed": config.seed,
            "warmup": config.warmup, "max_seq_len": max_seq_len,
            "dtype": _dtype_name(engine), "dtype_arg": config.dtype,
            "device_arg": config.device, "chat_template": has_chat_template(tokenizer),
            "timing": "decode-only: TPOT = sum(batch decode_s) / sum(new_tokens - 1); speedup = TPOT_AR / TPOT_spec; "
                      "efficiency = speedup / mean_tau",
            **config.extra,
        },
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


def format_table(report: dict) -> str:
    """A plain-text table: one row per dataset and an overall row."""
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
             f"K={s.get('block_size')}  T={s.get('temperature')}  batch={s.get('batch_size')}  "
             f"max_new_tokens={s.get('max_new_tokens')}  torch {report.get('torch_version')}")
    out = [title, line(header), sep]
    out += [line(r) for r in rows[:-1]]
    out += [sep, line(rows[-1])]
    acc = report["overall"].get("per_position_acceptance") or []
    out.append("acceptance per position (overall): " + " ".join(f"{a:.2f}" for a in acc))
    out.append(f"τ histogram (overall, τ=1..{len(report['overall'].get('histogram', []))}): "
               f"{report['overall'].get('histogram')}")
    return "\n".join(out)
