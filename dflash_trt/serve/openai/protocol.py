"""The OpenAI API as this server speaks it: request bodies (pydantic), errors, and the mapping to SamplingParams.

Request bodies follow OpenAI's `/v1/completions` and `/v1/chat/completions` (the fields clients send), plus vLLM's
extensions `top_k`, `stop_token_ids` and `ignore_eos`. Fields this server does not implement (logprobs, echo, suffix,
best_of, penalties, logit_bias, tools, ...) are refused with a 400 naming them when set to anything but their
neutral value; fields it does not know at all are ignored and logged (as vLLM does), so clients that send newer
optional fields keep working. Types are strict (no "0.5" for a number, no 16.0 for an integer); value ranges are the
engine's request layer's (`SamplingParams.validate`, `prepare_request`), with the messages naming the OpenAI fields.

Errors are OpenAI-shaped: `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, StrictInt

from dflash_trt.spec.sampling import SamplingParams

Number = Annotated[float, Strict()]  # a JSON number (an int is fine), not a string or a bool
MAX_N = 128  # choices per request (OpenAI's limit for chat)
DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's (and vLLM's) default for /v1/completions


class APIError(Exception):
    """An error response: HTTP status and the OpenAI error object."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def model_not_found(name: str) -> APIError:
    return APIError(404, f"The model `{name}` does not exist.", param="model", code="model_not_found")


def validation_message(errors: list[dict]) -> tuple[str, str | None]:
    """(message, param) for pydantic's / FastAPI's validation errors of a request body."""
    if not errors:
        return "invalid request body", None
    first = errors[0]
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "")
        return f"malformed JSON body: {detail}".rstrip(": ") + "; send one JSON object", None
    parts, param = [], None
    for err in errors:
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        # a union's members are named in loc (prompt.str, prompt.list[int]): keep the field path only
        loc = [x for x in loc if not any(c in x for c in "[]") and x not in ("str", "int", "float", "bool")]
        where = ".".join(loc) or "body"
        param = param or (loc[0] if loc else None)
        line = f"{where}: {err.get('msg', 'invalid')}"
        if line not in parts:
            parts.append(line)
    if len(parts) > 3:
        parts = parts[:3] + [f"... ({len(parts) - 3} more)"]
    return "invalid request: " + "; ".join(parts), param


def param_of(message: str, names) -> str | None:
    """The request field an engine RequestError is about (its message starts with the field's name)."""
    for name in sorted(names, key=len, reverse=True):
        if message.startswith(name + " ") or message.startswith(name + ":"):
            return name
    return None


class _Body(BaseModel):
    # Unknown fields are kept (and logged by the app), not refused: vLLM's choice; OpenAI adds optional fields often.
    model_config = ConfigDict(extra="allow")


class StreamOptions(_Body):
    include_usage: StrictBool = False


class _Sampling(_Body):
    """The sampling fields both endpoints share."""

    model: str
    temperature: Number | None = None  # OpenAI's default: 1
    top_p: Number | None = None
    top_k: StrictInt | None = None  # extension (vLLM): 0 or -1 = off
    seed: StrictInt | None = None
    n: StrictInt = 1
    stop: str | list[str] | None = None
    stop_token_ids: list[StrictInt] | None = None  # extension (vLLM): the stop token is emitted
    ignore_eos: StrictBool = False  # extension (vLLM)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # Not implemented: refused (400) unless neutral.
    presence_penalty: Number | None = None
    frequency_penalty: Number | None = None
    repetition_penalty: Number | None = None
    logit_bias: dict[str, Any] | None = None

    def unsupported(self) -> list[str]:
        bad = [name for name in ("presence_penalty", "frequency_penalty") if getattr(self, name) not in (None, 0, 0.0)]
        if self.repetition_penalty not in (None, 1, 1.0):
            bad.append("repetition_penalty")
        if self.logit_bias:
            bad.append("logit_bias")
        return bad

    def stop_strings(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if any(not s for s in stops):
            raise APIError(400, "stop: an empty stop string would end every request at once; give non-empty strings",
                           param="stop")
        return stops

    def sampling_params(self, max_tokens: int | None) -> SamplingParams:
        """One SamplingParams for the request (per-choice seeds: `per_choice`). max_tokens None: the room the prompt
        leaves within max_seq_len (decided by the engine thread once the prompt is tokenized)."""
        if isinstance(self.n, bool) or not 1 <= self.n <= MAX_N:
            raise APIError(400, f"n must be an integer in 1..{MAX_N}, got {self.n}", param="n")
        top_k = 0 if self.top_k == -1 else self.top_k
        return SamplingParams(max_new_tokens=max_tokens,  # type: ignore[arg-type]
                              temperature=1.0 if self.temperature is None else self.temperature,
                              top_k=0 if top_k is None else top_k, top_p=1.0 if self.top_p is None else self.top_p,
                              seed=self.seed, stop_token_ids=tuple(self.stop_token_ids or ()),
                              ignore_eos=self.ignore_eos)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


def per_choice(params: SamplingParams, n: int) -> list[SamplingParams]:
    """n choices: the same params, seed + i for choice i when a seed is given (else each draws its own)."""
    if params.seed is None or isinstance(params.seed, bool) or not isinstance(params.seed, int):
        return [params] * n
    return [dataclasses.replace(params, seed=params.seed + i) for i in range(n)]


def field_names(max_tokens_field: str) -> dict[str, str]:
    """SamplingParams fields as the request names them (for the request layer's messages)."""
    return {"max_new_tokens": max_tokens_field, "temperature": "temperature", "top_k": "top_k", "top_p": "top_p",
            "seed": "seed", "stop_token_ids": "stop_token_ids", "ignore_eos": "ignore_eos"}


PromptInput = Union[str, list[str], list[StrictInt], list[list[StrictInt]]]


class CompletionRequest(_Sampling):
    prompt: PromptInput
    max_tokens: StrictInt | None = DEFAULT_COMPLETION_MAX_TOKENS
    echo: StrictBool = False
    logprobs: StrictInt | None = None
    best_of: StrictInt | None = None
    suffix: str | None = None

    def unsupported(self) -> list[str]:
        bad = super().unsupported()
        if self.echo:
            bad.append("echo")
        if self.logprobs is not None:
            bad.append("logprobs")
        if self.best_of not in (None, self.n):
            bad.append("best_of")
        if self.suffix:
            bad.append("suffix")
        return bad

    def prompts(self) -> list[str | list[int]]:
        """The prompts (one, or a batch): each a str or a list of token ids."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if not p:
            raise APIError(400, "prompt is empty: give a string, a list of token ids or a list of prompts",
                           param="prompt")
        if isinstance(p[0], int):
            return [list(p)]  # type: ignore[list-item]
        return list(p)  # type: ignore[arg-type]


class ContentPart(_Body):
    type: str
    text: str | None = None


class ChatMessage(_Body):
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self, i: int) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        out = []
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise APIError(400, f"messages[{i}].content: only text parts are supported, got type {part.type!r}",
                               param="messages")
            out.append(part.text)
        return "".join(out)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: StrictInt | None = None
    max_completion_tokens: StrictInt | None = None
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None  # extension (vLLM): extra variables for the template

    def unsupported(self) -> list[str]:
        bad = super().unsupported()
        if self.logprobs:
            bad.append("logprobs")
        if self.top_logprobs:
            bad.append("top_logprobs")
        if self.tools:
            bad.append("tools")
        if self.tool_choice not in (None, "none", "auto"):
            bad.append("tool_choice")
        if self.response_format and self.response_format.get("type") not in (None, "text"):
            bad.append("response_format")
        return bad

    def max_tokens_field(self) -> tuple[int | None, str]:
        """(the budget, the field it came from): max_completion_tokens over the deprecated max_tokens."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens, "max_completion_tokens"
        return self.max_tokens, "max_tokens"

    def conversation(self) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.text(i)} for i, m in enumerate(self.messages)]
