"""Training data for a DFlash drafter: the target's own greedy continuations of corpus prompts (self-distillation).

The drafter must predict what *this target* will say, so its labels are the target's tokens, not the corpus text.
Continuations are generated with the torch engine in AR mode and cached as JSONL of token ids (no pickles), so a
resumed run reuses them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from tqdm import tqdm

from dflash_trt.engines.requests import raise_if_failed
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


def max_prefix_length(max_new_tokens: int) -> int:
    """The longest sampled prefix a branch >= 1 starts with (the room a sequence needs for it)."""
    return max(1, max_new_tokens // 4)


def branch_prefix_length(seed: int, branch: int, index: int, max_new_tokens: int) -> int:
    """Length of the sampled prefix of branch >= 1 of prompt `index`: 1..max_prefix_length, fixed by the seed."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + branch * 100_003 + index)
    return int(torch.randint(1, max_prefix_length(max_new_tokens) + 1, (1,), generator=g))


def self_distill(engine, prompts: list[list[int]], max_new_tokens: int, cache_file: Path, batch_size: int = 64,
                 desc: str = "self-distillation", branches: int = 1, seed: int = 0) -> list[tuple[int, list[int]]]:
    """(start of the greedy part, prompt + continuation) per (branch, prompt), branch-major; cached in `cache_file`
    (JSONL, token ids), so a resumed run reuses what was generated.

    Branch 0 is the target's greedy continuation of the prompt. Branch b >= 1 first samples a short prefix from the
    target (temperature 1, seeded per row) and then continues greedily: the greedy part is again exactly what the target
    says at T=0 from that point, so its tokens are valid labels, while the contexts leading to it are new. A greedy
    continuation is deterministic, so without branches a corpus gives one sequence per prompt however long one trains;
    branches multiply the distinct training contexts for the price of generation. The trainer draws anchors from the
    greedy part only."""
    from dflash_trt.spec.sampling import SamplingParams

    done: list[tuple[int, list[int]]] = []
    if cache_file.is_file():
        for line in cache_file.read_text().splitlines():
            row = json.loads(line)
            done.append((row["prompt_len"], row["tokens"]))
    total = len(prompts) * branches
    if len(done) >= total:
        return done[:total]
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    greedy = SamplingParams(max_new_tokens=max_new_tokens)
    with cache_file.open("a") as out, tqdm(total=total, initial=len(done), desc=desc, unit="seq") as bar:
        for lo in range(len(done), total, batch_size):
            ids = range(lo, min(lo + batch_size, total))
            branch_of = [i // len(prompts) for i in ids]
            starts = [list(prompts[i % len(prompts)]) for i in ids]
            sampled = [j for j, b in enumerate(branch_of) if b]
            if sampled:  # sampled prefixes; EOS is not a stop here, so every prefix has its full length
                params = [SamplingParams(max_new_tokens=branch_prefix_length(seed, branch_of[j], ids[j] % len(prompts),
                                                                             max_new_tokens),
                                         temperature=1.0, seed=seed * 1_000_003 + ids[j], ignore_eos=True)
                          for j in sampled]
                results = raise_if_failed(engine.generate([starts[j] for j in sampled], params, use_drafter=False))
                for j, result in zip(sampled, results):
                    starts[j] += result.token_ids
            for start, result in zip(starts, raise_if_failed(engine.generate(starts, greedy, use_drafter=False))):
                tokens = start + result.token_ids
                done.append((len(start), tokens))
                out.write(json.dumps({"prompt_len": len(start), "tokens": tokens}) + "\n")
            out.flush()
            bar.update(len(ids))
    return done
