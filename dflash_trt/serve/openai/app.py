"""The OpenAI-compatible FastAPI application over a torch engine: `make_app(engine, model_name=...)`.

    GET  /v1/models             the one served model
    POST /v1/completions        prompt: a string, token ids, or a batch of either; n choices each
    POST /v1/chat/completions   messages rendered with the tokenizer's chat template (add_generation_prompt=True)
    GET  /health                200 {"status": "ok", "running", "waiting", ...} while the engine thread serves
    GET  /metrics               Prometheus text format (metrics.py)

Both generation endpoints answer as OpenAI does, or stream server-sent events (`stream: true`): chunks shaped like
OpenAI's, then `data: [DONE]`. A client that goes away (a stream closed, a non-streamed request's connection dropped)
aborts its requests in the scheduler, which frees their batch slots at the next step boundary.
"""

# No `from __future__ import annotations` here: FastAPI reads the endpoints' parameter annotations (Request, the
# request bodies) as objects, and Request is imported inside make_app (fastapi stays an optional dependency).
import asyncio
import contextlib
import json
import logging
import time
import uuid

from dflash_trt.serve.openai import require_server_deps
from dflash_trt.serve.openai.metrics import Metrics
from dflash_trt.serve.openai.protocol import (APIError, ChatCompletionRequest, CompletionRequest, error_body,
                                              field_names, model_not_found, param_of, per_choice, validation_message)
from dflash_trt.serve.openai.runner import Admitted, Choice, EngineRunner, Rejected, Update
from dflash_trt.spec.stats import Stats

_log = logging.getLogger("dflash_trt.serve.openai")


class ClientGone(Exception):
    """The client closed its connection before its response was ready."""


def usage(prompt_tokens: int, updates: list[Update], verify_len: int) -> dict:
    """OpenAI's usage object, plus `dflash`: the requests' pooled acceptance statistics."""
    completion = sum(u.completion_tokens for u in updates)
    stats = Stats.merge([u.stats for u in updates if u.stats is not None])
    stats.verify_len = verify_len
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion,
            "dflash": {"mean_acceptance_length": stats.mean_tau, "steps": stats.steps, "verify_len": verify_len,
                       "per_position_acceptance": stats.per_position_acceptance,
                       "draft_steps": dict(stats.draft_steps)}}


def sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


def make_app(engine, *, model_name: str, verify_len: int | None = None, use_drafter: bool = True,
             steps_per_sync: int | None = None, draft: str | None = None):
    """The FastAPI app serving `engine` as `model_name`. Its engine thread starts and stops with the app (lifespan)."""
    require_server_deps()
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response, StreamingResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    runner = EngineRunner(engine, verify_len=verify_len, use_drafter=use_drafter, steps_per_sync=steps_per_sync,
                          draft=draft)
    metrics = Metrics(runner.scheduler.max_tau)  # τ buckets: up to K (a tree: its depth + 1)
    runner.set_metrics(metrics)
    created = int(time.time())

    @contextlib.asynccontextmanager
    async def lifespan(app):
        runner.start()
        try:
            yield
        finally:
            await asyncio.to_thread(runner.stop)

    app = FastAPI(title="dflash-trt OpenAI-compatible server", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.runner, app.state.metrics, app.state.model_name = runner, metrics, model_name

    class SSEResponse(StreamingResponse):
        """A stream whose generator is always closed when the response ends, however it ends (client gone
        included), so its cleanup (aborting the requests) runs now and not whenever it is garbage-collected."""

        async def __call__(self, scope, receive, send):
            try:
                await super().__call__(scope, receive, send)
            finally:
                await self.body_iterator.aclose()

    # ---- errors: OpenAI's shape, 400 for anything wrong with the request ---------------------------------------------

    def error_response(status: int, body: dict) -> JSONResponse:
        if 400 <= status < 500:
            metrics.rejected.inc()
        return JSONResponse(body, status_code=status)

    @app.exception_handler(APIError)
    async def on_api_error(request, err: APIError):
        return error_response(err.status, err.body())

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request, err: RequestValidationError):
        message, param = validation_message(list(err.errors()))
        return error_response(400, error_body(message, param=param))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request, err: StarletteHTTPException):
        kind = "invalid_request_error" if err.status_code < 500 else "server_error"
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code)
        return error_response(err.status_code, error_body(str(err.detail), kind, None, code))

    @app.exception_handler(Exception)
    async def on_exception(request, err: Exception):
        _log.exception("dflash-trt: unexpected error serving %s", request.url.path)
        return error_response(500, error_body(f"internal error: {type(err).__name__}: {err}", "server_error"))

    # ---- plumbing --------------------------------------------------------------------------------------------------

    def check(body) -> None:
        if body.model != model_name:
            raise model_not_found(body.model)
        bad = body.unsupported()
        if bad:
            which = "it" if len(bad) == 1 else "them"
            raise APIError(400, f"{', '.join(bad)}: not supported by this server; remove {which} or set the neutral "
                           "value", param=bad[0])
        if body.model_extra:
            _log.warning("dflash-trt: ignoring unknown request field(s): %s", ", ".join(sorted(body.model_extra)))

    async def watch_disconnect(request: Request) -> None:
        """Returns when the client disconnects (the body has been read: the next ASGI message is the disconnect)."""
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return

    async def next_message(q: asyncio.Queue, watcher: asyncio.Task):
        get = asyncio.ensure_future(q.get())
        done, _ = await asyncio.wait({get, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if get in done:
            return get.result()
        get.cancel()
        raise ClientGone

    async def generate(request: Request, body, choices: list[Choice], names: dict[str, str], label: str,
                       chat: bool, n_prompts: int):
        if not runner.alive:
            raise APIError(503, f"the engine is not running ({runner.failure or 'stopped'})", type="server_error")
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()

        def sink(message):
            loop.call_soon_threadsafe(q.put_nowait, message)

        gid = runner.submit(choices, stream=body.stream, sink=sink, label=label, field_names=names)
        watcher = asyncio.ensure_future(watch_disconnect(request))
        handed_over = False
        try:
            first = await next_message(q, watcher)
            if isinstance(first, Rejected):
                raise APIError(400, first.message, param=param_of(first.message, set(names.values()) | {label}))
            assert isinstance(first, Admitted)
            prompt_tokens = sum(first.prompt_tokens[i * body.n] for i in range(n_prompts))
            rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            base = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                    "created": int(time.time()), "model": model_name}
            if body.stream:
                watcher.cancel()  # the stream notices a disconnect itself (Starlette cancels it)
                handed_over = True
                return SSEResponse(stream(q, gid, base, len(choices), prompt_tokens, chat, body.include_usage),
                                   media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            finals: dict[int, Update] = {}
            while len(finals) < len(choices):
                update = await next_message(q, watcher)
                if isinstance(update, Update) and update.finished:
                    finals[update.index] = update
            handed_over = True  # nothing left running
            failed = [u for u in finals.values() if u.finish_reason == "error"]
            if failed:
                raise APIError(500, f"generation failed: {failed[0].error}", type="server_error")
            ordered = [finals[i] for i in range(len(choices))]
            if chat:
                out = [{"index": u.index, "message": {"role": "assistant", "content": u.text}, "logprobs": None,
                        "finish_reason": u.finish_reason} for u in ordered]
            else:
                out = [{"index": u.index, "text": u.text, "logprobs": None, "finish_reason": u.finish_reason}
                       for u in ordered]
            return {**base, "object": "chat.completion" if chat else "text_completion", "choices": out,
                    "usage": usage(prompt_tokens, ordered, runner.k), "system_fingerprint": None}
        except ClientGone:
            _log.info("dflash-trt: client gone, request %s aborted", gid)
            return Response(status_code=499)  # nobody reads it
        finally:
            watcher.cancel()
            if not handed_over:
                runner.abort(gid)  # rejected, failed, cancelled or the client is gone: free the slots

    async def stream(q: asyncio.Queue, gid: int, base: dict, n_choices: int, prompt_tokens: int, chat: bool,
                     include_usage: bool):
        finished: dict[int, Update] = {}
        complete = False

        def chunk(index: int, text: str | None, finish_reason: str | None, role: bool = False) -> dict:
            if chat:
                delta = {"role": "assistant", "content": ""} if role else ({"content": text} if text else {})
                choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            else:
                choice = {"index": index, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
            return {**base, "choices": [choice], **({"usage": None} if include_usage else {})}

        try:
            if chat:
                for i in range(n_choices):
                    yield sse(chunk(i, None, None, role=True))
            while len(finished) < n_choices:
                update = await q.get()
                if not isinstance(update, Update):
                    continue
                if update.finish_reason == "error":
                    yield sse(error_body(f"generation failed: {update.error}", "server_error"))
                    break
                if update.text or update.finished:
                    yield sse(chunk(update.index, update.text, update.finish_reason))
                if update.finished:
                    finished[update.index] = update
            else:
                if include_usage:
                    ordered = [finished[i] for i in range(n_choices)]
                    yield sse({**base, "choices": [], "usage": usage(prompt_tokens, ordered, runner.k)})
            yield sse("[DONE]")
            complete = True
        finally:
            if not complete or len(finished) < n_choices:
                runner.abort(gid)  # the client went away (or a choice failed): free the slots

    # ---- endpoints -------------------------------------------------------------------------------------------------

    @app.get("/health")
    async def health():
        info = {"model": model_name, "running": runner.running, "waiting": runner.waiting, "verify_len": runner.k,
                "speculative": runner.k > 1}
        if not runner.alive:
            return JSONResponse({"status": "error", "error": runner.failure or "the engine thread is not running",
                                 **info}, status_code=503)
        return {"status": "ok", **info}

    @app.get("/metrics")
    async def prometheus():
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    def model_card() -> dict:
        return {"id": model_name, "object": "model", "created": created, "owned_by": "dflash-trt",
                "max_model_len": engine.max_seq_len}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{name:path}")
    async def model(name: str):
        if name != model_name:
            raise model_not_found(name)
        return model_card()

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        check(body)
        prompts = body.prompts()
        stops = body.stop_strings()
        params = per_choice(body.sampling_params(body.max_tokens), body.n)
        choices = [Choice(prompt, p, stops) for prompt in prompts for p in params]
        return await generate(request, body, choices, field_names("max_tokens"), "prompt", False, len(prompts))

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request):
        check(body)
        tokenizer = engine.tokenizer
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise APIError(400, "the served model's tokenizer has no chat template (tokenizer_config.json "
                           "chat_template or chat_template.jinja), so messages cannot be rendered; use "
                           "/v1/completions with a prompt", param="messages")
        try:
            prompt = tokenizer.apply_chat_template(body.conversation(), tokenize=False, add_generation_prompt=True,
                                                   **(body.chat_template_kwargs or {}))
        except APIError:
            raise
        except Exception as err:  # noqa: BLE001 - e.g. the template's raise_exception for a role it does not know
            raise APIError(400, f"messages: the chat template cannot render them: {err}", param="messages") from None
        if not isinstance(prompt, str):
            raise APIError(400, "messages: the chat template did not render to text", param="messages")
        stops = body.stop_strings()
        max_tokens, field = body.max_tokens_field()
        params = per_choice(body.sampling_params(max_tokens), body.n)
        choices = [Choice(prompt, p, stops) for p in params]
        return await generate(request, body, choices, field_names(field), "messages", True, 1)

    return app
