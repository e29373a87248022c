"""Training data for a DFlash drafter: the target's own greedy continuations of corpus prompts (self-distillation).

The drafter must predict what *this target* will say, so its labels are the target's tokens, not the corpus text.
Continuations are generated with the torch engine in AR mode and cached as JSONL of token ids (no pickles), so a
resumed run reuses them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tqdm import tqdm

from dflash_trt.errors import ConfigError


def read_prompts(corpus: str | os.PathLike, limit: int | None = None) -> list[str]:
    """Prompts from a JSONL corpus: GSM8K-style `question`, FastChat-style `turns` (first turn), or `prompt`/`text`."""
    path = Path(corpus)
    if not path.is_file():
        raise ConfigError(f"--corpus {str(path)!r} does not exist; pass a JSONL file (e.g. data/gsm8k_train.jsonl)")
    prompts = []
    with path.open() as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise ConfigError(f"--corpus {path}:{lineno}: not valid JSON") from None
            text = row.get("question") or (row.get("turns") or [None])[0] or row.get("prompt") or row.get("text")
            if not isinstance(text, str) or not text:
                raise ConfigError(f"--corpus {path}:{lineno}: needs a 'question', 'turns', 'prompt' or 'text' string field")
            prompts.append(text)
            if limit is not None and len(prompts) >= limit:
                break
    if not prompts:
        raise ConfigError(f"--corpus {path}: no prompts found")
    return prompts


def encode_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a prompt, formatted exactly as the benchmark and serving format it (chat template if any)."""
    from dflash_trt.bench.datasets import format_prompt

    return list(tokenizer(format_prompt(tokenizer, text), add_special_tokens=False)["input_ids"])


def self_distill(engine, prompts: list[list[int]], max_new_tokens: int, cache_file: Path, batch_size: int = 64,
                 desc: str = "self-distillation") -> list[tuple[int, list[int]]]:
    """(prompt length, prompt + greedy continuation) per prompt; cached in `cache_file` (JSONL, token ids)."""
    from dflash_trt.spec.sampling import SamplingParams

    done: list[tuple[int, list[int]]] = []
    if cache_file.is_file():
        for line in cache_file.read_text().splitlines():
            row = json.loads(line)
            done.append((row["prompt_len"], row["tokens"]))
    if len(done) >= len(prompts):
        return done[: len(prompts)]
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    params = SamplingParams(max_new_tokens=max_new_tokens)
    with cache_file.open("a") as out, tqdm(total=len(prompts), initial=len(done), desc=desc, unit="seq") as bar:
        for lo in range(len(done), len(prompts), batch_size):
            batch = prompts[lo: lo + batch_size]
            for prompt, result in zip(batch, engine.generate(batch, params, use_drafter=False)):
                tokens = list(prompt) + result.token_ids
                done.append((len(prompt), tokens))
                out.write(json.dumps({"prompt_len": len(prompt), "tokens": tokens}) + "\n")
            out.flush()
            bar.update(len(batch))
    return done
