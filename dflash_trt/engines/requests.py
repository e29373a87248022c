"""The request layer every engine shares (the torch engine, TensorRT-LLM's, the Triton model through the scheduler).

What a request is (`Request`: token ids, checked SamplingParams, resolved seed, stop ids), how it is checked
(`prepare_request`, `per_prompt_params`, `resolve_verify_len`), when it stops (`stop_token_ids`, `finish_reason`),
and what comes back (`StepEvent` per step, `Result` at the end). One implementation of each rule; engines call these.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch

from dflash_trt.errors import DeprecatedOption, GenerationError, RequestError
from dflash_trt.spec.sampling import SamplingParams
from dflash_trt.spec.stats import Stats
from dflash_trt.spec.step import MAX_STOP_IDS
from dflash_trt.spec.tree import MAX_TREE_NODES


@dataclass
class Result:
    token_ids: list[int]  # generated tokens only
    text: str | None
    finish_reason: str  # "stop" (stop token / EOS emitted), "length" (max_new_tokens) or "error" (see `error`)
    stats: Stats
    prompt_token_ids: list[int] = field(default_factory=list)
    error: str | None = None  # finish_reason "error": what failed (the tokens before it are still valid output)


@dataclass
class StepEvent:
    """Tokens appended to one request by one step or window (what `stream` and `BatchScheduler.step` yield).

    `index` is the request's position in the prompts passed to generate/stream, or the request id given to
    `BatchScheduler.add`. On the request's last event `finished` is True and `finish_reason` ("stop", "length" or
    "error") and `result` (the complete Result) are set."""

    index: Hashable
    token_ids: list[int]
    finished: bool
    finish_reason: str | None = None
    result: Result | None = None


@dataclass(eq=False)
class Request:
    """A checked request: what every engine needs to run it."""

    request_id: Hashable
    ids: list[int]  # prompt token ids
    params: SamplingParams
    seed: int  # resolved (a random one when params.seed is None)
    stops: list[int]  # stop ids, EOS included unless ignore_eos


def encode_prompt(prompt, tokenizer, vocab_size: int) -> list[int]:
    """A prompt -> token ids: a str is tokenized; a sequence of integer token ids (list, tuple, 1-D integer tensor or
    array) is taken as is. Anything else (bytes, floats, strings as ids, bools) is a RequestError."""
    if isinstance(prompt, str):
        if tokenizer is None:
            raise RequestError("a text prompt needs a tokenizer; the target directory has none: pass token ids")
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError as err:  # e.g. undecodable command-line bytes (surrogate escapes)
            raise RequestError(f"prompt is not valid UTF-8 text (character {err.start}: {prompt[err.start:err.end]!r}); "
                               "send UTF-8 text or token ids") from None
        ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    elif isinstance(prompt, (bytes, bytearray)):
        raise RequestError("prompt is bytes: decode it to str (UTF-8) for a text prompt, or pass a list of int token ids")
    else:
        if hasattr(prompt, "tolist") and hasattr(prompt, "dtype"):  # torch tensor / numpy array
            floating = prompt.dtype.is_floating_point if isinstance(prompt, torch.Tensor) else prompt.dtype.kind not in "iu"
            if floating:
                raise RequestError(f"prompt token ids must be integers, got an array of {prompt.dtype}")
            prompt = prompt.tolist()
        if not isinstance(prompt, Sequence):
            raise RequestError(f"prompt must be a str or a list of int token ids, got {type(prompt).__name__}")
        bad = next((t for t in prompt if isinstance(t, bool) or not isinstance(t, numbers.Integral)), None)
        if bad is not None:
            raise RequestError(f"prompt token ids must be ints, got {bad!r} ({type(bad).__name__}); pass a str for text "
                               "or a list of int token ids")
        ids = [int(t) for t in prompt]
    if not ids:
        raise RequestError("prompt is empty: give at least one token")
    if any(not 0 <= t < vocab_size for t in ids):
        raise RequestError(f"prompt has token ids outside the vocabulary 0..{vocab_size - 1}")
    return ids


def raise_if_failed(results: Sequence[Result], what: str = "generation") -> Sequence[Result]:
    """For callers that need every output (the build's gate and calibration, bench, self-distillation): a failed
    request is a GenerationError naming it, not a short output."""
    for i, r in enumerate(results):
        if r.finish_reason == "error":
            raise GenerationError(f"{what}: prompt {i} failed ({r.error})")
    return results


def stop_token_ids(params: SamplingParams, eos_token_ids: Sequence[int]) -> list[int]:
    """The ids that end a request: its stop ids, then the target's EOS ids unless ignore_eos (no duplicates)."""
    stops = list(params.stop_token_ids)
    if not params.ignore_eos:
        stops += list(eos_token_ids)
    return list(dict.fromkeys(int(t) for t in stops))


def finish_reason(token_ids: Sequence[int], stops: Sequence[int]) -> str:
    """Why a finished request ended: "stop" when its last token is a stop id, else "length" (its budget)."""
    return "stop" if token_ids and token_ids[-1] in stops else "length"


def per_prompt_params(prompts, params) -> list[SamplingParams]:
    """generate/stream's arguments: a list of prompts, and one SamplingParams for all or one per prompt."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise RequestError("prompts must be a list of prompts (wrap a single prompt in a list)")
    n = len(prompts)
    if params is None:
        params = SamplingParams()
    plist = list(params) if isinstance(params, (list, tuple)) else [params] * n
    if len(plist) != n:
        raise RequestError(f"got {n} prompts but {len(plist)} SamplingParams; pass one, or one per prompt")
    return plist


def prepare_request(request_id: Hashable, prompt, params: SamplingParams | None, *, tokenizer, vocab_size: int,
                    eos_token_ids: Sequence[int], max_seq_len: int | None, label: str = "request",
                    field_names: dict[str, str] | None = None) -> Request:
    """Every check a request gets, in every engine: the sampling parameters (field_names: how the caller's API names
    them in messages), the prompt, the stop ids, the length budget. Returns the Request; raises one RequestError."""
    params = SamplingParams() if params is None else params
    if not isinstance(params, SamplingParams):
        raise RequestError(f"{label}: params must be a SamplingParams, got {type(params).__name__}")
    params.validate(vocab_size, field_names)
    ids = encode_prompt(prompt, tokenizer, vocab_size)
    if max_seq_len is not None and len(ids) + params.max_new_tokens > max_seq_len:
        budget = (field_names or {}).get("max_new_tokens", "max_new_tokens")
        raise RequestError(f"{label}: {len(ids)} prompt tokens + {budget} {params.max_new_tokens} exceeds "
                           f"max_seq_len {max_seq_len}; shorten the prompt, lower {budget} or raise max_seq_len")
    stops = stop_token_ids(params, eos_token_ids)
    if len(stops) > MAX_STOP_IDS:
        raise RequestError(f"{label}: {len(stops)} stop token ids (EOS included) is more than the {MAX_STOP_IDS} a "
                           "request may have; give fewer stop_token_ids")
    return Request(request_id, ids, params, params.resolved_seed(), stops)


def resolve_verify_len(verify_len: int | None, drafter_block_size: int | None, draft: str | None = None) -> int:
    """K, the number of block slots the target verifies per step: 2..B (B = the drafter's block_size; default B).
    Without a drafter (plain AR) K is 1. `draft`: the "chain:K" K came from (an error names it as given)."""
    if drafter_block_size is None:
        return 1
    k = drafter_block_size if verify_len is None else verify_len
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= drafter_block_size:
        b = drafter_block_size
        note = f"(2 = one draft per step, {b} = the drafter's block_size)"
        if draft is not None:
            raise RequestError(f"draft {draft!r}: a chain verifies 2..{b} block slots {note}, got {k}; use 'chain:K' "
                               f"with K in 2..{b}, or 'auto'")
        raise RequestError(f"verify_len must be an integer in 2..{b} {note}, got {verify_len!r}; omit it to use {b}")
    return k


def resolve_draft(draft: str | None, verify_len: int | None, drafter_block_size: int | None) -> tuple[str, int]:
    """The draft budget: ("chain", K) for `draft="chain:K"` (or `verify_len=K`, the same thing; default K = B),
    ("tree", N) for `draft="tree:N"` (a draft tree of N nodes, 2..MAX_TREE_NODES: spec/tree.py), ("auto", B) for
    `draft="auto"` (K chosen per window, up to B: spec/budget.py). Without a drafter: ("chain", 1)."""
    if drafter_block_size is None:
        return "chain", 1
    if draft is None:
        return "chain", resolve_verify_len(verify_len, drafter_block_size)
    if not isinstance(draft, str):
        raise RequestError(f"draft must be 'chain:K', 'tree:N' or 'auto', got {draft!r}")
    kind, _, arg = draft.strip().partition(":")
    if kind == "auto" and not arg:
        if verify_len is not None:
            raise RequestError(f"draft 'auto' chooses the verify length itself: give draft or verify_len, not both "
                               f"(verify_len {verify_len!r})")
        return "auto", drafter_block_size
    if kind == "chain" and arg.strip().isdigit():
        k = int(arg)
        if verify_len is not None and verify_len != k:
            raise RequestError(f"draft {draft!r} and verify_len {verify_len!r} disagree: give one of them")
        return "chain", resolve_verify_len(k, drafter_block_size, draft=draft)
    if kind == "tree" and arg.strip().isdigit():
        n = int(arg)
        if verify_len is not None:
            raise RequestError(f"draft {draft!r} verifies a tree of {n} nodes: give draft or verify_len, not both "
                               f"(verify_len {verify_len!r})")
        if not 2 <= n <= MAX_TREE_NODES:
            raise RequestError(f"draft {draft!r}: a tree needs 2..{MAX_TREE_NODES} nodes (the root included), got {n}")
        return "tree", n
    raise RequestError(f"draft must be 'chain:K' (K in 2..{drafter_block_size}), 'tree:N' (N in 2..{MAX_TREE_NODES}) "
                       f"or 'auto', got {draft!r}")


def verify_len_from(verify_len: int | None, block_size: int | None, where: str = "verify_len") -> int | None:
    """The verify length K, also from the deprecated `block_size` option (which once meant K in generate, bench and
    serve; block_size is the drafter's B)."""
    if block_size is None:
        return verify_len
    if verify_len is not None and verify_len != block_size:
        raise RequestError(f"{where} {verify_len} and the deprecated block_size {block_size} disagree: give only "
                           f"{where}")
    warnings.warn(f"block_size is deprecated for the verify length: use {where} (block_size is the drafter's block)",
                  DeprecatedOption, stacklevel=3)
    return block_size
