"""The TensorRT-LLM engine: DFlash speculative decoding through `tensorrt_llm.LLM` (PyTorch backend) for an engine
directory built with `backend: trtllm`, with the same Result / StepEvent / Stats as the torch engine.

TensorRT-LLM is imported only when an engine is opened; without it every entry point raises one ConfigError
(TRTLLM_MISSING). TensorRT-LLM runs the whole spec step itself (DFlashWorker in _torch/speculative/dflash.py);
this module maps requests in and statistics out:

* requests: our SamplingParams -> tensorrt_llm.SamplingParams (to_trtllm_sampling_kwargs). Stop handling is
  mirrored on the torch engine's: EOS ids and stop ids are passed as `stop_token_ids` with
  `include_stop_str_in_output=True` (TensorRT-LLM strips a matched stop token otherwise) and TensorRT-LLM's own
  single-`end_id` EOS is switched off (`ignore_eos=True`), so every stop token ends up in the output exactly as the
  torch engine emits it.
* statistics: every request is streamed with `stream_interval: 1`, so each response after the first carries the
  tokens one decoding iteration accepted: τ for that step (accepted drafts + 1 bonus), the same quantity the torch
  engine records. The first response is the prefill's token and is not a step, as in the torch engine. TensorRT-LLM's
  own per-request figures (`decoding_iter`, `avg_decoded_tokens_per_iter`, and with `return_perf_metrics` the
  speculative-decoding counters) are kept in Result.trtllm_metrics for cross-checking.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflash_trt import checkpoint as ckpt
from dflash_trt.engines.requests import (Result, StepEvent, finish_reason, per_prompt_params, prepare_request,
                                         stop_token_ids, verify_len_from)
from dflash_trt.engines.trtllm_options import check_trtllm_requirements, read_llm_api_options
from dflash_trt.errors import ConfigError, RequestError
from dflash_trt.spec.sampling import SamplingParams
from dflash_trt.spec.stats import Stats

TRTLLM_MISSING = ("backend trtllm needs TensorRT-LLM (tensorrt_llm) which is not installed here: install it on a "
                  "Linux CUDA host (pip install tensorrt_llm), use backend torch, or run in the Docker image")


def import_tensorrt_llm():
    """`tensorrt_llm`, or ConfigError(TRTLLM_MISSING) when it cannot be imported."""
    try:
        import tensorrt_llm
    except ImportError as err:  # ModuleNotFoundError, or a broken install (missing CUDA/MPI libraries)
        detail = "" if isinstance(err, ModuleNotFoundError) and err.name == "tensorrt_llm" else f" ({err})"
        raise ConfigError(TRTLLM_MISSING + detail) from None
    return tensorrt_llm


def trtllm_available() -> bool:
    try:
        import_tensorrt_llm()
    except ConfigError:
        return False
    return True


# ---- the parts that need no TensorRT-LLM ----------------------------------------------------------------------------


def to_trtllm_sampling_kwargs(params: SamplingParams, eos_token_ids: Sequence[int], seed: int) -> dict[str, Any]:
    """Keyword arguments of `tensorrt_llm.SamplingParams` (tensorrt_llm/sampling_params.py) for one request.

    temperature 0 = greedy (TensorRT-LLM's convention too); top_k 0 / top_p 1 (off here) = None there (its runtime
    defaults: all tokens); `seed` is the request's resolved seed (TensorRT-LLM's default would be 0 for every request).
    Tokens are the same as the torch engine's for greedy requests; sampled requests follow TensorRT-LLM's sampler,
    not our counter-based noise, so they match the torch engine in distribution, not token for token."""
    stops = stop_token_ids(params, eos_token_ids)
    return {
        "max_tokens": int(params.max_new_tokens),
        "temperature": float(params.temperature),
        "top_k": int(params.top_k) if params.top_k > 0 else None,
        "top_p": float(params.top_p) if params.top_p < 1 else None,
        "seed": int(seed),
        "stop_token_ids": stops or None,
        "include_stop_str_in_output": True,
        "ignore_eos": True,
        "detokenize": False,
        "return_perf_metrics": True,
    }


def stats_from_deltas(deltas: Sequence[int], verify_len: int) -> tuple[Stats, bool]:
    """Stats from the token counts of one request's streamed responses (the first = prefill). Returns (stats,
    per_step): per_step False when a response carried more than `verify_len` tokens, i.e. responses were coalesced
    and do not map to single steps; then no τ is recorded (use trtllm_metrics' mean instead)."""
    counts = [int(d) for d in deltas if int(d) > 0]
    steps = counts[1:]
    stats = Stats(verify_len=verify_len, new_tokens=sum(counts))
    if any(s > verify_len for s in steps):
        return stats, False
    stats.taus = steps
    if steps:  # every step verifies the engine's fixed chain (its max_draft_len + 1 slots; 1: AR)
        stats.count_draft(f"chain:{verify_len}", len(steps))
    return stats, True


@dataclass
class TrtllmResult(Result):
    """requests.Result plus what TensorRT-LLM itself reported for the request (decoding_iter,
    avg_decoded_tokens_per_iter, acceptance counters, per_step: whether stats.taus are per-step values)."""

    trtllm_metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineDir:
    """What TrtllmEngine needs from an engine directory (manifest.json + trtllm/llm_api_options.yaml)."""

    path: Path
    manifest: dict[str, Any]
    options: dict[str, Any]
    quantization: str
    verify_len: int

    @classmethod
    def load(cls, engine_dir: str | os.PathLike) -> "EngineDir":
        from dflash_trt.manifest import load_manifest, manifest_path, resolve, runtime_verify_len

        path = Path(engine_dir)
        mpath = path / "manifest.json"
        manifest = load_manifest(path)
        if manifest.get("backend") != "trtllm":
            raise ConfigError(f"{mpath}: field 'backend' is {manifest.get('backend')!r}, not 'trtllm'; open it with the "
                              f"torch engine or rebuild with backend: trtllm")
        options = read_llm_api_options(manifest_path(manifest, path, "trtllm", "llm_api_options"))
        spec = options.get("speculative_config")
        if isinstance(spec, dict) and isinstance(spec.get("speculative_model"), str):
            spec = dict(spec, speculative_model=str(resolve(path, spec["speculative_model"])))
            options = dict(options, speculative_config=spec)
        options = dict(options, model=str(resolve(path, options["model"])))
        drafter = manifest.get("drafter") or {}
        quantization = drafter.get("quantization", "none")
        k = runtime_verify_len(manifest)
        if isinstance(spec, dict):
            k = int(spec.get("max_draft_len", 0)) + 1
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"{mpath}: field 'runtime.verify_len' must be an integer >= 2, got {k!r}")
        return cls(path, manifest, options, quantization, k)


# ---- the engine ------------------------------------------------------------------------------------------------------


class TrtllmEngine:
    """A `tensorrt_llm.LLM` serving a target with (or without) its DFlash drafter."""

    def __init__(self, llm, options: dict[str, Any], *, tokenizer=None, target_cfg=None):
        self.llm = llm
        self.options = options
        spec = options.get("speculative_config")
        self.spec = isinstance(spec, dict)
        self.verify_len = int(spec["max_draft_len"]) + 1 if self.spec else 1
        self.max_batch_size = int(options.get("max_batch_size") or 1)
        self.max_seq_len = int(options.get("max_seq_len") or 0) or None
        self.target_cfg = target_cfg if target_cfg is not None else ckpt.load_target_config(options["model"])
        self.tokenizer = tokenizer

    # ---- construction ------------------------------------------------------------------------------------------------

    @classmethod
    def from_engine_dir(cls, engine_dir: str | os.PathLike, *, use_drafter: bool = True,
                        tokenizer: bool = True) -> "TrtllmEngine":
        """Open an engine directory built with backend trtllm. use_drafter=False serves the same target without the
        drafter (plain autoregressive decoding, for the AR baseline of a benchmark)."""
        ed = EngineDir.load(engine_dir)
        options = ed.options if use_drafter else {k: v for k, v in ed.options.items() if k != "speculative_config"}
        return cls.from_options(options, quantization=ed.quantization, tokenizer=tokenizer)

    @classmethod
    def from_options(cls, options: dict[str, Any], *, quantization: str = "none",
                     tokenizer: bool = True) -> "TrtllmEngine":
        """Build `tensorrt_llm.LLM(**options)` from LLM API options (as written by trtllm_options.llm_api_options)."""
        target_cfg = ckpt.load_target_config(options["model"])  # bad target dir: CheckpointError before the import
        trt = import_tensorrt_llm()
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("backend trtllm needs a CUDA GPU and torch.cuda.is_available() is False: run on a GPU host "
                              "or use backend torch")
        check_trtllm_requirements(quantization, torch.cuda.get_device_capability(), options.get("dtype"))
        from tensorrt_llm.llmapi import CudaGraphConfig, DFlashDecodingConfig, KvCacheConfig

        kwargs = dict(options)
        if isinstance(kwargs.get("kv_cache_config"), dict):
            kwargs["kv_cache_config"] = KvCacheConfig(**kwargs["kv_cache_config"])
        if isinstance(kwargs.get("cuda_graph_config"), dict):
            kwargs["cuda_graph_config"] = CudaGraphConfig(**kwargs["cuda_graph_config"])
        spec = kwargs.get("speculative_config")
        if isinstance(spec, dict):
            if spec.get("decoding_type") != "DFlash":
                raise ConfigError(f"speculative_config.decoding_type is {spec.get('decoding_type')!r}, not 'DFlash'; "
                                  f"rebuild the engine directory")
            kwargs["speculative_config"] = DFlashDecodingConfig(**{k: v for k, v in spec.items() if k != "decoding_type"})
        try:
            llm = trt.LLM(**kwargs)
        except (ValueError, TypeError) as err:  # pydantic's ValidationError is a ValueError
            msg = " ".join(str(err).split())
            raise ConfigError(f"TensorRT-LLM refused the LLM API options: {msg[:500]}") from None
        tok = None
        if tokenizer:
            from dflash_trt.checkpoint import load_tokenizer

            tok = load_tokenizer(options["model"])
        return cls(llm, options, tokenizer=tok, target_cfg=target_cfg)

    def shutdown(self) -> None:
        if self.llm is not None:
            self.llm.shutdown()
            self.llm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    # ---- public API (same as TorchEngine) ----------------------------------------------------------------------------

    def generate(self, prompts: Sequence[str | Sequence[int]], params: SamplingParams | Sequence[SamplingParams] | None = None,
                 *, verify_len: int | None = None, use_drafter: bool = True,
                 block_size: int | None = None) -> list[TrtllmResult]:
        results: list[TrtllmResult | None] = [None] * len(prompts) if isinstance(prompts, Sequence) else []
        for _ in self._run(prompts, params, verify_len_from(verify_len, block_size), use_drafter, results):
            pass
        return results  # type: ignore[return-value]

    def stream(self, prompts: Sequence[str | Sequence[int]], params: SamplingParams | Sequence[SamplingParams] | None = None,
               *, verify_len: int | None = None, use_drafter: bool = True, block_size: int | None = None):
        """Yields StepEvents (index, token_ids, finished) as TensorRT-LLM returns them."""
        results: list[TrtllmResult | None] = [None] * len(prompts) if isinstance(prompts, Sequence) else []
        yield from self._run(prompts, params, verify_len_from(verify_len, block_size), use_drafter, results)

    # ---- internals ---------------------------------------------------------------------------------------------------

    def _check_mode(self, verify_len, use_drafter) -> None:
        if bool(use_drafter) != self.spec:
            raise RequestError(
                f"this TensorRT-LLM engine was opened {'with' if self.spec else 'without'} the drafter; use_drafter="
                f"{use_drafter} needs another engine: TrtllmEngine.from_engine_dir(dir, use_drafter={bool(use_drafter)})")
        if verify_len is not None and verify_len != self.verify_len:
            raise RequestError(f"verify_len {verify_len} differs from the engine's {self.verify_len} (TensorRT-LLM fixes "
                               f"max_draft_len when the engine is built): omit it or rebuild with runtime.verify_len "
                               f"{verify_len}")

    def _run(self, prompts, params, verify_len, use_drafter, results) -> Iterator:
        if self.llm is None:
            raise RequestError("this engine was shut down; open a new one")
        plist = per_prompt_params(prompts, params)
        self._check_mode(verify_len, use_drafter)
        cfg = self.target_cfg
        reqs = [prepare_request(i, prompt, p, tokenizer=self.tokenizer, vocab_size=cfg.vocab_size,
                                eos_token_ids=cfg.eos_token_ids, max_seq_len=self.max_seq_len, label=f"prompt {i}")
                for i, (prompt, p) in enumerate(zip(prompts, plist))]
        n = len(reqs)
        from tensorrt_llm import SamplingParams as TrtSamplingParams

        eos = list(cfg.eos_token_ids)
        events: queue.Queue = queue.Queue()
        t0 = time.perf_counter()
        handles = [self.llm.generate_async(r.ids, streaming=True, sampling_params=TrtSamplingParams(
            **to_trtllm_sampling_kwargs(r.params, eos, r.seed))) for r in reqs]

        def pump(i: int, handle) -> None:  # one thread per request: iterating a streaming result blocks
            try:
                for out in handle:
                    events.put((i, list(out.outputs[0].token_ids_diff), out, time.perf_counter()))
            except BaseException as err:  # surfaced in the caller's thread
                events.put((i, err, None, time.perf_counter()))
            events.put((i, None, None, time.perf_counter()))  # end of this request's stream

        threads = [threading.Thread(target=pump, args=(i, h), daemon=True) for i, h in enumerate(handles)]
        for t in threads:
            t.start()
        tokens: list[list[int]] = [[] for _ in range(n)]
        deltas: list[list[int]] = [[] for _ in range(n)]
        first_t: list[float | None] = [None] * n
        last_t = [t0] * n
        done = [False] * n
        final: list[Any] = [None] * n
        try:
            while not all(done):
                i, new, out, t = events.get()
                if isinstance(new, BaseException):
                    raise RequestError(f"prompt {i}: TensorRT-LLM failed the request: {' '.join(str(new).split())[:300]}")
                if new is None:  # stream ended
                    if not done[i]:
                        done[i] = True
                        yield StepEvent(i, [], True)
                    continue
                final[i] = out
                if new:
                    tokens[i].extend(new)
                    deltas[i].append(len(new))
                    if first_t[i] is None:
                        first_t[i] = t
                    last_t[i] = t
                finished = bool(out.finished)
                if new or finished:
                    done[i] = done[i] or finished
                    yield StepEvent(i, new, finished)
        finally:
            if not all(done):  # an error, or the caller stopped iterating: do not leave requests running
                for h, d in zip(handles, done):
                    if not d:
                        _abort(h)
        for th in threads:
            th.join(timeout=5)

        for i, r in enumerate(reqs):
            stats, per_step = stats_from_deltas(deltas[i], self.verify_len)
            start = first_t[i] if first_t[i] is not None else t0
            stats.prefill_s, stats.decode_s = start - t0, last_t[i] - start
            out = final[i]
            comp = out.outputs[0] if out is not None else None
            reason = getattr(comp, "finish_reason", None)
            if reason not in ("stop", "length"):
                reason = finish_reason(tokens[i], r.stops)
            metrics = {"per_step": per_step, "seed": r.seed}
            for name in ("decoding_iter", "avg_decoded_tokens_per_iter"):
                if getattr(out, name, None) is not None:
                    metrics[name] = getattr(out, name)
            spec = getattr(getattr(comp, "request_perf_metrics", None), "speculative_decoding", None)
            for name in ("acceptance_rate", "total_accepted_draft_tokens", "total_draft_tokens"):
                if getattr(spec, name, None) is not None:
                    metrics[name] = getattr(spec, name)
            text = self.tokenizer.decode(tokens[i], skip_special_tokens=True) if self.tokenizer is not None else None
            results[i] = TrtllmResult(tokens[i], text, reason, stats, r.ids, trtllm_metrics=metrics)


def _abort(handle) -> None:
    try:
        handle.abort()
    except Exception:  # best effort: the request may already be finished
        pass


class TrtllmBenchEngines:
    """Both modes of a trtllm engine directory, for `dflash-trt bench --engine-dir`.

    TensorRT-LLM fixes speculative decoding when an LLM is built, so the AR baseline is a second `tensorrt_llm.LLM`
    over the same target without `speculative_config`. Only one is alive at a time (two would split the GPU's KV
    cache memory); `phased` tells the bench runner to run every AR batch, then every DFlash batch, so each LLM is built
    once. `generate` has TorchEngine's signature."""

    phased = True

    def __init__(self, engine_dir: str | os.PathLike):
        ed = EngineDir.load(engine_dir)  # bad directories fail here, before TensorRT-LLM is imported
        self.engine_dir = Path(engine_dir)
        self.verify_len = ed.verify_len  # K is fixed per engine: bench's default and only verify length
        self.max_batch_size = int(ed.options.get("max_batch_size") or 1)
        self.max_seq_len = int(ed.options.get("max_seq_len") or 2048)
        self.dtype_name = str(ed.options.get("dtype", "auto"))
        import torch

        self.device = torch.device("cuda")
        from dflash_trt.checkpoint import load_tokenizer

        self.tokenizer = load_tokenizer(ed.options["model"])
        self._engine: TrtllmEngine | None = None
        self._spec: bool | None = None

    def generate(self, prompts, params=None, *, verify_len: int | None = None, use_drafter: bool = True):
        if self._spec is not bool(use_drafter):
            self.shutdown()
            self._engine = TrtllmEngine.from_engine_dir(self.engine_dir, use_drafter=use_drafter, tokenizer=False)
            self._engine.tokenizer = self.tokenizer
            self._spec = bool(use_drafter)
        return self._engine.generate(prompts, params, verify_len=verify_len if use_drafter else None,
                                     use_drafter=use_drafter)

    def shutdown(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()
        self._engine, self._spec = None, None
