"""Small clients for the served `dflash` model: HTTP generate (one response) and gRPC streaming (one per step).

Both take the prompt (text, or a list of token ids) and the llmapi-style sampling fields as keyword arguments without
the `sampling_param_` prefix (max_tokens, temperature, top_k, top_p, seed, stop, stop_token_ids, ignore_eos).
"""

from __future__ import annotations

import json
import queue
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import numpy as np

MODEL_NAME = "dflash"

_TYPES = {"max_tokens": ("INT32", np.int32), "temperature": ("FP32", np.float32), "top_k": ("INT32", np.int32),
          "top_p": ("FP32", np.float32), "seed": ("UINT64", np.uint64), "ignore_eos": ("BOOL", np.bool_)}


class ServerError(Exception):
    """The server answered the request with an error (its message names the problem)."""


@dataclass
class Completion:
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stats: dict = field(default_factory=dict)  # total_accepted_draft_tokens, total_draft_tokens, acceptance_rate, ...
    responses: int = 0
    ttft_s: float | None = None  # time to the first response carrying a token
    latency_s: float = 0.0
    token_times: list[float] = field(default_factory=list)  # arrival time (s since send) of each streamed response


_STATS = ("total_accepted_draft_tokens", "total_draft_tokens", "acceptance_rate", "mean_tau", "batch_size",
          "draft_steps")


def _stat(name: str, value):
    """A statistic as the model sent it: draft_steps (JSON text: steps by draft) as a dict, the rest as numbers."""
    if name == "draft_steps":
        return json.loads(value.decode() if isinstance(value, bytes) else value)
    return value


def http_generate(url: str, prompt: str | list[int], *, model: str = MODEL_NAME, timeout: float = 300.0,
                  **params) -> Completion:
    """POST /v2/models/<model>/generate (non-streaming). Raises ServerError with the server's message on an error."""
    body = {"text_input": prompt} if isinstance(prompt, str) else {"input_ids": list(prompt)}
    body.update({f"sampling_param_{k}": v for k, v in params.items()})
    req = urllib.request.Request(f"http://{url}/v2/models/{model}/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = json.loads(r.read())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except json.JSONDecodeError:
            pass
        raise ServerError(detail) from None
    ids = out.get("output_token_ids", [])
    return Completion(out.get("text_output", ""), list(ids) if isinstance(ids, list) else [ids],
                      out.get("finish_reason"), {k: _stat(k, out[k]) for k in _STATS if k in out}, 1, None,
                      time.perf_counter() - t0)


def _inputs(grpcclient, prompt, streaming, params):
    items = []
    if isinstance(prompt, str):
        items.append(("text_input", "BYTES", np.array([prompt.encode("utf-8")], dtype=np.object_)))
    else:
        items.append(("input_ids", "INT32", np.array(list(prompt), dtype=np.int32)))
    items.append(("streaming", "BOOL", np.array([streaming])))
    for k, v in params.items():
        if k == "stop" and not isinstance(v, np.ndarray):
            items.append(("sampling_param_stop", "BYTES", np.array([s.encode() for s in v], dtype=np.object_)))
        elif k == "stop_token_ids":
            items.append(("sampling_param_stop_token_ids", "INT32", np.array(v, dtype=np.int32)))
        elif isinstance(v, np.ndarray):  # sent as is (any dtype the server may refuse: for tests of its type checks)
            dtype = {np.dtype(np.int32): "INT32", np.dtype(np.float32): "FP32", np.dtype(np.bool_): "BOOL"}.get(v.dtype, "BYTES")
            items.append((f"sampling_param_{k}", dtype, v))
        else:
            dtype, np_type = _TYPES[k]
            items.append((f"sampling_param_{k}", dtype, np.array([v], dtype=np_type)))
    tensors = []
    for name, dtype, array in items:
        t = grpcclient.InferInput(name, list(array.shape), dtype)
        t.set_data_from_numpy(array)
        tensors.append(t)
    return tensors


class GrpcStream:
    """One gRPC bidirectional stream; `generate` sends a request on it and collects its responses."""

    def __init__(self, url: str, model: str = MODEL_NAME):
        import tritonclient.grpc as grpcclient

        self._grpc, self.model = grpcclient, model
        self.client = grpcclient.InferenceServerClient(url)
        self._queue: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self._queue.put((time.perf_counter(), result, error)))
        self._next = 0

    def send(self, prompt, *, streaming: bool = True, request_id: str | None = None, **params) -> str:
        rid = request_id or f"r{self._next}"
        self._next += 1
        self.client.async_stream_infer(self.model, _inputs(self._grpc, prompt, streaming, params), request_id=rid,
                                       enable_empty_final_response=True)
        return rid

    def receive(self, timeout: float = 300.0):
        """(arrival time, InferResult or None, error or None) of the next response on the stream."""
        return self._queue.get(timeout=timeout)

    def generate(self, prompt, *, streaming: bool = True, timeout: float = 300.0, **params) -> Completion:
        """Send one request and wait for its final response (use one GrpcStream per concurrent client)."""
        t0 = time.perf_counter()
        self.send(prompt, streaming=streaming, **params)
        done = Completion()
        while True:
            t, result, error = self.receive(timeout)
            if error is not None:
                raise ServerError(str(error))
            done.responses += 1
            text = result.as_numpy("text_output")
            ids = result.as_numpy("output_token_ids")
            if ids is not None and ids.size:
                if done.ttft_s is None:
                    done.ttft_s = t - t0
                done.token_times.append(t - t0)
                done.token_ids += ids.reshape(-1).tolist()
            if text is not None and text.size:
                done.text += b"".join(x if isinstance(x, bytes) else str(x).encode() for x in text.reshape(-1)).decode()
            for k in ("finish_reason",) + _STATS:
                v = result.as_numpy(k)
                if v is not None and v.size:
                    v = v.reshape(-1)[0]
                    if k == "finish_reason":
                        done.finish_reason = v.decode() if isinstance(v, bytes) else str(v)
                    else:
                        done.stats[k] = _stat(k, v.item() if hasattr(v, "item") else v)
            final = result.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                done.latency_s = time.perf_counter() - t0
                return done

    def close(self, cancel: bool = False) -> None:
        self.client.stop_stream(cancel_requests=cancel)
        self.client.close()
