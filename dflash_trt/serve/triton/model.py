"""Triton Python-backend model `dflash`: DFlash speculative decoding with in-flight batching.

Copied verbatim into `<repository>/dflash/1/model.py` by `dflash_trt.serve.triton.repository.write_model_repository`;
everything it needs comes from the `parameters` of config.pbtxt (target, drafter, runtime options and the Python path
that holds the dflash_trt package, which the backend stub does not inherit).

Inputs and outputs follow TensorRT-LLM's `triton_backend/all_models/llmapi` model (text_input, streaming,
sampling_param_*; text_output, finish_reason, total_accepted_draft_tokens, total_draft_tokens, acceptance_rate), plus
`input_ids` (token-id prompts), `output_token_ids`, `mean_tau`, `batch_size` (the most requests that shared one of
this request's steps) and `draft_steps` (JSON: the request's steps by the draft they verified, "chain:1" an AR step:
with draft auto, what it chose).

Threads: `execute` only parses the request tensors and queues them (decoupled: it returns at once). One loop thread
owns the engine and its BatchScheduler: at every step boundary it admits queued requests (validation errors go back
as error responses, to that request only), drops cancelled ones, runs one step for the whole batch and sends each
request the tokens the step accepted for it (streaming) or its full result when it finishes.
"""

import json
import os
import queue
import sys
import threading
import time
import traceback

import numpy as np
import triton_python_backend_utils as pb_utils

_STOP = object()
# SamplingParams fields as this model's inputs name them (in error messages)
FIELD_NAMES = {"max_new_tokens": "sampling_param_max_tokens", "temperature": "sampling_param_temperature",
               "top_k": "sampling_param_top_k", "top_p": "sampling_param_top_p", "seed": "sampling_param_seed",
               "stop_token_ids": "sampling_param_stop_token_ids", "ignore_eos": "sampling_param_ignore_eos"}


def _param(params, name, default=None):
    value = params.get(name, {}).get("string_value")
    return default if value in (None, "") else value


class _Live:
    """A request the loop is serving."""

    __slots__ = ("request", "sender", "streaming", "stop_strings", "sent_text", "batch_size", "token_ids")

    def __init__(self, request, sender, streaming, stop_strings):
        self.request, self.sender, self.streaming, self.stop_strings = request, sender, streaming, stop_strings
        self.sent_text = ""  # streaming: the text already sent
        self.batch_size = 0
        self.token_ids = []


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        self._input_names = sorted(i["name"] for i in config.get("input", []))
        for path in reversed((_param(params, "python_path", "") or "").split(os.pathsep)):
            if path and path not in sys.path:
                sys.path.insert(0, path)
        import torch  # noqa: F401  (after the path is set)

        from dflash_trt.engines.torch_engine import TorchEngine
        from dflash_trt.errors import DFlashError
        from dflash_trt.spec.sampling import SamplingParams

        self._DFlashError, self._SamplingParams = DFlashError, SamplingParams
        self.logger = pb_utils.Logger
        threads = int(_param(params, "torch_num_threads", "0"))
        if threads > 0:
            torch.set_num_threads(threads)
        self.speculative = _param(params, "speculative", "true").lower() == "true"
        # Paths inside an engine directory are written relative to this model's directory (args["model_repository"]).
        model_dir = args.get("model_repository") or os.getcwd()
        target = os.path.normpath(os.path.join(model_dir, _param(params, "target")))
        drafter = os.path.normpath(os.path.join(model_dir, _param(params, "drafter"))) if self.speculative else None
        # verify_len: K; older repositories called it block_size
        self.verify_len = int(_param(params, "verify_len", _param(params, "block_size", "0"))) or None
        self.draft = _param(params, "draft", None)  # "chain:K" / "auto" (None: verify_len)
        self.default_max_tokens = int(_param(params, "default_max_tokens", "128"))
        self.cancel_check_s = float(_param(params, "cancellation_check_period_ms", "20")) / 1000
        device = _param(params, "device", "auto")
        if device == "cuda" and args.get("model_instance_kind") == "GPU":  # KIND_GPU: one instance per GPU
            device = f"cuda:{args.get('model_instance_device_id', 0)}"
        prior = _param(params, "draft_prior")  # the build's measured acceptance curve, comma-separated
        self.engine = TorchEngine.from_pretrained(
            target, drafter, device=None if device == "auto" else device, dtype=_param(params, "dtype", "auto"),
            max_batch_size=int(_param(params, "max_batch_size", "8")), max_seq_len=int(_param(params, "max_seq_len", "0")) or None,
            decode_loop=_param(params, "decode_loop", "auto"), steps_per_sync=int(_param(params, "steps_per_sync", "4")),
            compile=_param(params, "compile", "false") == "true",
            draft_prior=[float(p) for p in prior.split(",")] if prior and self.speculative else None)
        self.scheduler = self._new_scheduler()
        self.logger.log_info(f"[dflash] python {sys.version.split()[0]} ({sys.executable}), numpy {np.__version__}, "
                             f"torch {torch.__version__}")
        self.logger.log_info(
            f"[dflash] loaded target={target} drafter={drafter} device={self.engine.device} "
            f"max_batch_size={self.engine.max_batch_size} max_seq_len={self.engine.max_seq_len} verify_len={self.scheduler.k} "
            f"draft={self.scheduler.budget.describe()} draft_prior={'measured' if self.engine.draft_prior else 'default'}")
        graphs, seconds = self.scheduler.capture_graphs()  # before any request: none waits for a capture
        if graphs:
            self.logger.log_info(f"[dflash] captured {graphs} CUDA graphs (step shapes) in {seconds:.1f} s")
        self._queue = queue.Queue()
        self._next_id = 0
        self._thread = threading.Thread(target=self._loop, name="dflash-loop", daemon=True)
        self._thread.start()

    def _new_scheduler(self):
        return self.engine.new_scheduler(verify_len=self.verify_len, use_drafter=self.speculative,
                                         draft=self.draft if self.speculative else None)

    # ---- request parsing (Triton's thread) ---------------------------------------------------------------------------

    @staticmethod
    def _scalar(request, name, kind):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            return None
        array = tensor.as_numpy()
        if array.size != 1:
            raise ValueError(f"input '{name}' must hold exactly one value, got shape {list(array.shape)}")
        value = array.reshape(-1)[0]
        if kind is bool:
            return bool(value)
        if kind is int:
            if not np.issubdtype(array.dtype, np.integer):
                raise ValueError(f"input '{name}' must be an integer")
            return int(value)
        return float(value)

    def _parse(self, request):
        """Request tensors -> (prompt, SamplingParams, streaming, stop strings). Type/shape problems raise ValueError;
        value ranges are checked by the scheduler's add (the request layer: the checks generate runs, the fields named
        as this model names them)."""
        # HTTP generate turns JSON keys that are not inputs into request parameters: a misspelled field
        # (sampling_param_max_token) would be ignored without a word. Triton's own keys (triton_*) are fine.
        extra = sorted(k for k in json.loads(request.parameters() or "{}") if not k.startswith("triton_"))
        if extra:
            raise ValueError(f"unknown field(s) {', '.join(extra)}: this model's inputs are "
                             f"{', '.join(self._input_names)}")
        text = pb_utils.get_input_tensor_by_name(request, "text_input")
        ids = pb_utils.get_input_tensor_by_name(request, "input_ids")
        if (text is None) == (ids is None):
            raise ValueError("give exactly one of 'text_input' (a string) or 'input_ids' (token ids)")
        if text is not None:
            values = text.as_numpy().reshape(-1)
            if values.size != 1:
                raise ValueError(f"text_input must hold exactly one prompt, got {values.size}; send one request per prompt")
            prompt = values[0]
            prompt = prompt.decode("utf-8") if isinstance(prompt, bytes) else str(prompt)
            if not prompt:
                raise ValueError("text_input is empty: give a non-empty prompt")
        else:
            prompt = [int(t) for t in ids.as_numpy().reshape(-1)]
            if not prompt:
                raise ValueError("input_ids is empty: give at least one token id")
        stop_tensor = pb_utils.get_input_tensor_by_name(request, "sampling_param_stop")
        stop_strings = []
        if stop_tensor is not None:
            for s in stop_tensor.as_numpy().reshape(-1):
                if not isinstance(s, (bytes, str)):
                    raise ValueError(f"sampling_param_stop entries must be strings, got {type(s).__name__}")
                s = s.decode("utf-8") if isinstance(s, bytes) else s
                if not s:
                    raise ValueError("sampling_param_stop has an empty string; give non-empty stop strings")
                stop_strings.append(s)
        max_tokens = self._scalar(request, "sampling_param_max_tokens", int)
        temperature = self._scalar(request, "sampling_param_temperature", float)
        top_k = self._scalar(request, "sampling_param_top_k", int)
        top_p = self._scalar(request, "sampling_param_top_p", float)
        seed = self._scalar(request, "sampling_param_seed", int)
        stop_ids = pb_utils.get_input_tensor_by_name(request, "sampling_param_stop_token_ids")
        params = self._SamplingParams(
            max_new_tokens=self.default_max_tokens if max_tokens is None else max_tokens,
            temperature=0.0 if temperature is None else temperature, top_k=0 if top_k is None else top_k,
            top_p=1.0 if top_p is None else top_p, seed=seed,
            stop_token_ids=tuple(int(t) for t in stop_ids.as_numpy().reshape(-1)) if stop_ids is not None else (),
            ignore_eos=bool(self._scalar(request, "sampling_param_ignore_eos", bool)))
        streaming = bool(self._scalar(request, "streaming", bool))
        return prompt, params, streaming, stop_strings

    @staticmethod
    def _send_error(sender, message):
        sender.send(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message)),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                prompt, params, streaming, stops = self._parse(request)
            except (ValueError, TypeError, UnicodeDecodeError) as err:
                self._send_error(sender, f"bad request: {err}")
                continue
            self._queue.put((request, sender, prompt, params, streaming, stops))
        return None

    # ---- the loop (one thread owns the engine) -----------------------------------------------------------------------

    def _loop(self):
        from dflash_trt.serve.queueing import take_queued

        live = {}  # request id -> _Live
        last_cancel_check = 0.0
        while True:  # everything that arrived since the last step joins now
            items = take_queued(self._queue, wait=not live and not self.scheduler.has_work)
            for item in items:
                if item is _STOP:
                    for rid in list(live):
                        self._fail(live.pop(rid), "the server is shutting down")
                    return
                request, sender, prompt, params, streaming, stops = item
                rid, self._next_id = self._next_id, self._next_id + 1
                try:
                    self.scheduler.add(rid, prompt, params, label="the prompt", field_names=FIELD_NAMES)
                except self._DFlashError as err:
                    self._send_error(sender, f"bad request: {err}")
                    continue
                live[rid] = _Live(request, sender, streaming, stops)
            now = time.monotonic()
            if live and now - last_cancel_check >= self.cancel_check_s:
                last_cancel_check = now
                for rid, state in list(live.items()):
                    if state.request.is_cancelled():
                        self.scheduler.abort(rid)
                        del live[rid]
                        try:
                            state.sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                        except Exception as err:  # the client is gone: nothing to tell it
                            self.logger.log_warn(f"[dflash] cancelled request {rid}: {err}")
            if not self.scheduler.has_work:
                continue
            try:
                # Events go out as they exist: new requests' first tokens before the decode step runs (TTFT).
                for event in self.scheduler.step_iter():
                    state = live.get(event.index)
                    if state is None:
                        continue
                    if event.finish_reason == "error":  # this request failed (alone): the others go on
                        self._fail(live.pop(event.index), event.result.error)
                        continue
                    if state.token_ids:  # not its prefill event: it took part in the decode step just run
                        state.batch_size = max(state.batch_size, self.scheduler.last_batch_size)
                    try:
                        self._on_event(event, state, live)
                    except Exception as err:  # one request's failure (e.g. its client is gone) never stops the others
                        self.logger.log_error(f"[dflash] request {event.index}: {err}")
                        self.scheduler.abort(event.index)
                        live.pop(event.index, None)
            except Exception as err:  # not a request's failure (the scheduler isolates those): fail the batch, go on
                self.logger.log_error(f"[dflash] step failed: {err}\n{traceback.format_exc()}")
                for rid in list(live):
                    self._fail(live.pop(rid), f"generation failed: {err}")
                self.scheduler = self._new_scheduler()

    def _fail(self, state, message):
        try:
            self._send_error(state.sender, message)
        except Exception:
            pass

    def _on_event(self, event, state, live):
        state.token_ids.extend(event.token_ids)
        engine = self.engine
        text = None
        finish_reason = event.finish_reason
        if state.stop_strings or state.streaming or event.finished:
            text = engine.tokenizer.decode(state.token_ids, skip_special_tokens=True) if engine.tokenizer else ""
        stats = event.result.stats if event.result is not None else self.scheduler.stats_of(event.index)
        if state.stop_strings:
            hit = [text.find(s) for s in state.stop_strings if s in text]
            if hit:  # a stop string: cut the text before it and end the request here
                text, finish_reason = text[: min(hit)], "stop"
                if not event.finished:
                    self.scheduler.abort(event.index)
        done = finish_reason is not None
        if not done and not state.streaming:
            return
        if state.streaming:
            # Only whole characters: a token that ends inside a UTF-8 sequence waits for the next one.
            stable = text if done else text.rstrip("\ufffd")
            if not done and state.stop_strings:  # hold back a tail that may be the start of a stop string
                hold = max((k for stop in state.stop_strings for k in range(1, len(stop)) if stable.endswith(stop[:k])),
                           default=0)
                stable = stable[: len(stable) - hold]
            delta, state.sent_text = stable[len(state.sent_text):], stable
            out_text, out_ids = delta, event.token_ids
        else:
            out_text, out_ids = text, state.token_ids
        tensors = [
            pb_utils.Tensor("text_output", np.array([out_text.encode("utf-8")], dtype=np.object_)),
            pb_utils.Tensor("output_token_ids", np.array(out_ids, dtype=np.int32)),
        ]
        # The request's DFlash statistics so far, on every response (the final one has the totals).
        taus = stats.taus if stats is not None else []
        accepted = sum(t - 1 for t in taus)
        drafted = stats.draft_tokens if stats is not None else 0  # (a budget such as auto varies it per step)
        drafts = json.dumps(stats.draft_steps if stats is not None else {}, sort_keys=True)
        tensors += [
            pb_utils.Tensor("total_accepted_draft_tokens", np.array([accepted], dtype=np.int32)),
            pb_utils.Tensor("total_draft_tokens", np.array([drafted], dtype=np.int32)),
            pb_utils.Tensor("acceptance_rate", np.array([accepted / drafted if drafted else 0.0], dtype=np.float32)),
            pb_utils.Tensor("mean_tau", np.array([sum(taus) / len(taus) if taus else 0.0], dtype=np.float32)),
            pb_utils.Tensor("batch_size", np.array([state.batch_size], dtype=np.int32)),
            pb_utils.Tensor("draft_steps", np.array([drafts.encode()], dtype=np.object_)),
        ]
        if done:
            tensors.append(pb_utils.Tensor("finish_reason", np.array([finish_reason.encode()], dtype=np.object_)))
            live.pop(event.index, None)
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if done else 0
        state.sender.send(pb_utils.InferenceResponse(output_tensors=tensors), flags=flags)

    def finalize(self):
        self._queue.put(_STOP)
        self._thread.join(timeout=30)
        self.logger.log_info("[dflash] finalized")
