"""Shared fixtures: tiny random checkpoint pairs made once per session (no hub, no network)."""

from __future__ import annotations

import pytest
import torch

from dflash_trt import tiny

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def make_pair(tmp_path_factory):
    """make_pair(family="qwen3", tie=False, block_size=16, vocab_size=None, dtype="float32", seed=0, **target_kwargs)
    -> (target_dir, drafter_dir). vocab_size=None: with the tiny BPE tokenizer; an int: no tokenizer, token 0 = EOS,
    the last token = MASK. Cached per argument set."""
    cache: dict = {}

    def _make(family="qwen3", tie=False, block_size=16, vocab_size=None, dtype="float32", seed=0, **target_kwargs):
        key = (family, tie, block_size, vocab_size, dtype, seed, tuple(sorted(target_kwargs.items())))
        if key not in cache:
            root = tmp_path_factory.mktemp(f"pair-{family}-{vocab_size or 'tok'}")
            if vocab_size is None:
                cache[key] = tiny.make_tiny_pair(root, family=family, seed=seed, block_size=block_size, dtype=dtype,
                                                 tie=tie, **target_kwargs)
            else:
                target = tiny.make_target(root / "target", family=family, vocab_size=vocab_size, eos_id=0, tie=tie,
                                          dtype=dtype, seed=seed, **target_kwargs)
                drafter = tiny.make_drafter(root / "drafter", target, mask_token_id=vocab_size - 1,
                                            block_size=block_size, seed=seed + 1)
                cache[key] = (target, drafter)
        return cache[key]

    return _make
