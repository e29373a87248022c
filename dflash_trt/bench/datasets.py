"""Prompt sets for `dflash-trt bench`: FastChat-style JSONL (one object per line with `turns`, a list of str).

The first turn is the prompt. If the tokenizer has a chat template the turn is wrapped as one user message with the
generation prompt appended; otherwise the raw turn is used. Prompts are handed to the engine as token ids, truncated
from the left so that prompt + max_new_tokens fits the engine's max_seq_len.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from dflash_trt.errors import DFlashError


class DatasetError(DFlashError):
    """A prompt-set file is missing, unreadable or has a malformed line."""


@dataclass
class PromptSet:
    name: str  # the file stem, e.g. "eagle_gsm8k"
    path: Path
    turns: list[str]  # the first turn of each selected line, in file order


def dataset_name(path: str | os.PathLike) -> str:
    return Path(path).stem


def load_prompt_set(path: str | os.PathLike, num_prompts: int | None = None) -> PromptSet:
    """The first turn of the first `num_prompts` lines (all lines if None) of a FastChat JSONL file.

    Blank lines are skipped. Every *selected* line must be a JSON object whose `turns` is a non-empty list of
    strings with a non-empty first turn; the file is read only as far as needed."""
    path = Path(path)
    if num_prompts is not None and (isinstance(num_prompts, bool) or not isinstance(num_prompts, int) or num_prompts < 1):
        raise DatasetError(f"--num-prompts must be an integer >= 1, got {num_prompts!r}; omit it to use every prompt")
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise DatasetError(f"--dataset {str(path)!r} {what}; pass a FastChat-style .jsonl file "
                           "(one {\"turns\": [...]} object per line), e.g. data/prompts/eagle_gsm8k.jsonl")
    turns: list[str] = []
    try:
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if num_prompts is not None and len(turns) >= num_prompts:
                    break
                if not line.strip():
                    continue
                turns.append(_first_turn(path, lineno, line))
    except UnicodeDecodeError as err:
        raise DatasetError(f"--dataset {str(path)!r} is not UTF-8 text ({err.reason}); pass a UTF-8 .jsonl file") from None
    except OSError as err:
        raise DatasetError(f"--dataset {str(path)!r} cannot be read ({err.strerror}); check the path and permissions") from None
    if not turns:
        raise DatasetError(f"--dataset {str(path)!r} has no prompts (it is empty); add one {{\"turns\": [...]}} object per line")
    return PromptSet(dataset_name(path), path, turns)


def _first_turn(path: Path, lineno: int, line: str) -> str:
    where = f"--dataset {str(path)!r} line {lineno}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise DatasetError(f"{where} is not valid JSON ({err.msg}); each line must be one JSON object") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{where} is a JSON {type(obj).__name__}, not an object; write {{\"turns\": [\"...\"]}}")
    if "turns" not in obj:
        raise DatasetError(f"{where} has no 'turns' field; each line needs \"turns\": [\"<prompt>\", ...]")
    turns = obj["turns"]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        raise DatasetError(f"{where}: 'turns' must be a non-empty list of strings, got {type(turns).__name__}")
    if not turns[0].strip():
        raise DatasetError(f"{where}: the first turn is empty; give a prompt text")
    return turns[0]


def load_prompt_sets(paths: list[str | os.PathLike], num_prompts: int | None = None) -> list[PromptSet]:
    """Several prompt sets; their names (file stems) must be distinct since the report is keyed by them."""
    if not paths:
        raise DatasetError("no --dataset given; pass at least one FastChat-style .jsonl file")
    sets = [load_prompt_set(p, num_prompts) for p in paths]
    seen: dict[str, Path] = {}
    for s in sets:
        if s.name in seen:
            raise DatasetError(f"--dataset {str(seen[s.name])!r} and {str(s.path)!r} have the same name {s.name!r} "
                               "(the file stem keys the report); rename one or pass each file once")
        seen[s.name] = s.path
    return sets


def has_chat_template(tokenizer) -> bool:
    return tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))


def format_prompt(tokenizer, turn: str) -> str:
    """The text the model sees: the chat-templated user turn (with the generation prompt) or the raw turn."""
    if has_chat_template(tokenizer):
        return tokenizer.apply_chat_template([{"role": "user", "content": turn}], tokenize=False,
                                             add_generation_prompt=True)
    return turn


def encode_prompt(tokenizer, turn: str, max_prompt_tokens: int) -> tuple[list[int], bool]:
    """(token ids, truncated?): the formatted prompt tokenized without extra special tokens (a chat template already
    has them), keeping only the last `max_prompt_tokens` tokens."""
    if tokenizer is None:
        raise DatasetError("the target directory has no tokenizer, so text prompts cannot be encoded; "
                           "add the tokenizer files to --target")
    if max_prompt_tokens < 1:
        raise DatasetError(f"no room for a prompt: max_prompt_tokens is {max_prompt_tokens}; "
                           "lower --max-new-tokens or raise --max-seq-len")
    ids = list(tokenizer(format_prompt(tokenizer, turn), add_special_tokens=False)["input_ids"])
    if not ids:
        raise DatasetError(f"prompt {turn[:40]!r} encodes to no tokens; remove it from the dataset")
    if len(ids) > max_prompt_tokens:
        return ids[-max_prompt_tokens:], True
    return ids, False
