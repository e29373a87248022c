"""`dflash-trt` command line: make-tiny-pair + generate end to end, and one clean error line (exit 2) per bad input.

Most runs call dflash_trt.cli.main() in-process (fast); one runs the installed console script in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dflash_trt import checkpoint as ckpt
from dflash_trt.cli import main

PREFIX = "dflash-trt generate: error:"


@pytest.fixture(scope="module")
def cli_pair(tmp_path_factory):
    """A pair written by the CLI itself: `make-tiny-pair --output DIR` (with tokenizer, fp32, block 16)."""
    out = tmp_path_factory.mktemp("cli") / "pair"
    assert main(["make-tiny-pair", "--output", str(out)]) == 0
    return out


def run_main(capsys, *argv):
    rc = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def assert_clean_error(rc, out, err, *needles):
    """Exit 2, one line on stderr starting with the prefix and naming every needle, no traceback."""
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(PREFIX), err
    assert "Traceback" not in err and "Traceback" not in out
    for needle in needles:
        assert needle in lines[0], f"error does not name {needle!r}: {lines[0]}"


def generate_args(pair: Path, *extra):
    return ["generate", "--target", pair / "target", "--drafter", pair / "drafter", "--prompt", "hello", *extra]


# ---------------------------------------------------------------------------------------------------------------------
# 1. happy paths
# ---------------------------------------------------------------------------------------------------------------------


def test_make_tiny_pair_layout(cli_pair, capsys):
    assert (cli_pair / "target" / "config.json").is_file()
    assert (cli_pair / "target" / "model.safetensors").is_file()
    assert (cli_pair / "target" / "tokenizer.json").is_file()
    assert (cli_pair / "drafter" / "config.json").is_file()
    assert (cli_pair / "drafter" / "model.safetensors").is_file()
    assert not [p for p in cli_pair.iterdir() if p.name.startswith(".")]  # no temp dirs left
    ckpt.check_pair(ckpt.load_target_config(cli_pair / "target"), ckpt.load_drafter_config(cli_pair / "drafter"))


def test_generate_json_check_ar(cli_pair, capsys):
    rc, out, err = run_main(capsys, *generate_args(cli_pair, "--prompt", "The answer is", "--max-new-tokens", 12,
                                                    "--check-ar", "--json", "--device", "cpu"))
    assert rc == 0, err
    report = json.loads(out)
    assert report["mode"] == "dflash"
    assert [r["prompt"] for r in report["results"]] == ["hello", "The answer is"]
    block = ckpt.load_drafter_config(cli_pair / "drafter").block_size
    for r in report["results"]:
        assert isinstance(r["text"], str)
        assert 1 <= len(r["token_ids"]) <= 12
        assert all(isinstance(t, int) for t in r["token_ids"])
        assert r["finish_reason"] in ("stop", "length")
    stats = report["stats"]
    assert stats["verify_len"] == block
    assert 1 <= stats["mean_tau"] <= block
    assert stats["new_tokens"] == sum(len(r["token_ids"]) for r in report["results"])
    assert report["matches_ar"] == [True, True]


def test_generate_text_output(cli_pair, capsys):
    rc, out, err = run_main(capsys, *generate_args(cli_pair, "--max-new-tokens", 4, "--verify-len", 4, "--device", "cpu"))
    assert rc == 0, err
    assert "--- prompt: 'hello'" in out
    assert "mean_tau=" in out


def test_generate_no_draft_without_drafter(cli_pair, capsys):
    rc, out, err = run_main(capsys, "generate", "--target", cli_pair / "target", "--prompt", "hello", "--no-draft",
                            "--max-new-tokens", 6, "--json", "--device", "cpu")
    assert rc == 0, err
    report = json.loads(out)
    assert report["mode"] == "ar"
    assert 1 <= len(report["results"][0]["token_ids"]) <= 6
    assert "matches_ar" not in report


def test_generate_sampling_is_lossless_and_seeded(cli_pair, capsys):
    args = generate_args(cli_pair, "--max-new-tokens", 8, "--temperature", 0.8, "--top-p", 0.9, "--seed", 7,
                         "--check-ar", "--json", "--device", "cpu")
    rc, out, err = run_main(capsys, *args)
    assert rc == 0, err
    first = json.loads(out)
    assert first["matches_ar"] == [True]
    rc, out, _ = run_main(capsys, *args)
    assert json.loads(out)["results"][0]["token_ids"] == first["results"][0]["token_ids"]


def test_default_dtype_is_the_checkpoints(tmp_path, capsys):
    from dflash_trt.engines.torch_engine import TorchEngine

    out = tmp_path / "bf16"
    rc, _, err = run_main(capsys, "make-tiny-pair", "--output", out, "--dtype", "bfloat16", "--block-size", 8)
    assert rc == 0, err
    engine = TorchEngine.from_pretrained(out / "target", out / "drafter", device="cpu", dtype="auto", tokenizer=False,
                                         max_batch_size=1, max_seq_len=64)
    assert engine.target.lm_head.weight.dtype == torch.bfloat16
    assert engine.drafter.fc.weight.dtype == torch.bfloat16
    assert engine.target_cache.k.dtype == torch.bfloat16
    rc, stdout, err = run_main(capsys, *generate_args(out, "--max-new-tokens", 4, "--json", "--device", "cpu"))
    assert rc == 0, err
    assert json.loads(stdout)["stats"]["verify_len"] == 8
    # an explicit --dtype overrides it
    engine = TorchEngine.from_pretrained(out / "target", None, device="cpu", dtype="float32", tokenizer=False,
                                         max_batch_size=1, max_seq_len=64)
    assert engine.target.lm_head.weight.dtype == torch.float32


def test_console_script_subprocess(cli_pair):
    """The installed `dflash-trt` entry point, for real (one run: starting Python + torch costs seconds)."""
    exe = shutil.which("dflash-trt") or str(Path(sys.executable).parent / "dflash-trt")
    assert os.access(exe, os.X_OK), "console script dflash-trt is not installed"
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false"}
    good = subprocess.run([exe, *map(str, generate_args(cli_pair, "--max-new-tokens", 5, "--json", "--device", "cpu"))],
                          capture_output=True, text=True, env=env, timeout=120)
    assert good.returncode == 0, good.stderr
    report = json.loads(good.stdout)
    assert report["mode"] == "dflash" and 1 <= len(report["results"][0]["token_ids"]) <= 5
    assert "Traceback" not in good.stderr


# ---------------------------------------------------------------------------------------------------------------------
# 2. bad inputs: exit 2, one line, no traceback
# ---------------------------------------------------------------------------------------------------------------------


def test_mismatched_pair(cli_pair, make_pair, capsys):
    other_target, _ = make_pair(vocab_size=256)  # a different vocabulary than the CLI pair's tokenizer
    rc, out, err = run_main(capsys, "generate", "--target", other_target, "--drafter", cli_pair / "drafter",
                            "--prompt", "hello", "--device", "cpu")
    assert_clean_error(rc, out, err, "vocab_size")


def test_swapped_pair(cli_pair, capsys):
    rc, out, err = run_main(capsys, "generate", "--target", cli_pair / "drafter", "--drafter", cli_pair / "target",
                            "--prompt", "hello", "--device", "cpu")
    assert_clean_error(rc, out, err, "architectures")


def test_missing_target_dir(cli_pair, tmp_path, capsys):
    rc, out, err = run_main(capsys, "generate", "--target", tmp_path / "nope", "--drafter", cli_pair / "drafter",
                            "--prompt", "hello", "--device", "cpu")
    assert_clean_error(rc, out, err, "target", str(tmp_path / "nope"), "does not exist")


def test_missing_drafter_dir(cli_pair, tmp_path, capsys):
    rc, out, err = run_main(capsys, "generate", "--target", cli_pair / "target", "--drafter", tmp_path / "nope",
                            "--prompt", "hello", "--device", "cpu")
    assert_clean_error(rc, out, err, "drafter", "does not exist")


@pytest.mark.parametrize("flags, needles", [
    (["--verify-len", "0"], ["verify_len", "2..16"]),
    (["--verify-len", "1"], ["verify_len"]),
    (["--verify-len", "17"], ["verify_len", "2..16"]),
    (["--verify-len", "4", "--block-size", "8"], ["--verify-len 4", "block_size 8", "disagree"]),
    (["--temperature", "-1"], ["temperature"]),
    (["--temperature", "nan"], ["temperature"]),
    (["--top-p", "0"], ["top_p"]),
    (["--top-p", "1.5"], ["top_p"]),
    (["--top-k", "-1"], ["top_k"]),
    (["--max-new-tokens", "0"], ["max_new_tokens"]),
    (["--seed", "-1"], ["seed"]),
    (["--dtype", "float64"], ["dtype", "float64"]),
    (["--max-seq-len", "4"], ["max_seq_len"]),
    (["--device", "cuda"], ["cuda", "--device cpu"]),
    (["--device", "cuda:0"], ["cuda"]),
], ids=lambda v: " ".join(v) if isinstance(v, list) and v and v[0].startswith("--") else None)
def test_bad_generate_flags(cli_pair, capsys, flags, needles):
    if "--device" not in flags:
        flags = [*flags, "--device", "cpu"]
    if flags[0] == "--device" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    rc, out, err = run_main(capsys, *generate_args(cli_pair, "--max-new-tokens", 4, *flags))
    assert_clean_error(rc, out, err, *needles)


def test_drafter_required_without_no_draft(cli_pair, capsys):
    rc, out, err = run_main(capsys, "generate", "--target", cli_pair / "target", "--prompt", "hello", "--device", "cpu")
    assert_clean_error(rc, out, err, "--drafter", "--no-draft")


def test_empty_prompt(cli_pair, capsys):
    rc, out, err = run_main(capsys, "generate", "--target", cli_pair / "target", "--no-draft", "--prompt", "",
                            "--device", "cpu")
    assert_clean_error(rc, out, err, "prompt")


def test_corrupt_drafter_weights(cli_pair, tmp_path, capsys):
    drafter = shutil.copytree(cli_pair / "drafter", tmp_path / "drafter")
    data = (drafter / "model.safetensors").read_bytes()
    (drafter / "model.safetensors").write_bytes(data[: len(data) // 3])
    rc, out, err = run_main(capsys, "generate", "--target", cli_pair / "target", "--drafter", drafter, "--prompt", "hi",
                            "--device", "cpu")
    assert_clean_error(rc, out, err, "drafter", "safetensors")


def test_unknown_device_string(cli_pair, capsys):
    rc, out, err = run_main(capsys, *generate_args(cli_pair, "--device", "tpu"))
    assert_clean_error(rc, out, err, "device", "tpu")


# ---- make-tiny-pair -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", ["1", "0"])
def test_make_tiny_pair_bad_block_size(tmp_path, capsys, block):
    rc = main(["make-tiny-pair", "--output", str(tmp_path / "pair"), "--block-size", block])
    err = capsys.readouterr().err
    assert rc == 2, f"exit {rc}; wrote {sorted(p.name for p in (tmp_path / 'pair').iterdir())}"
    assert "block_size" in err or "--block-size" in err
    assert not (tmp_path / "pair").exists()


def test_make_tiny_pair_output_is_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    rc = main(["make-tiny-pair", "--output", str(tmp_path / "file")])
    err = capsys.readouterr().err
    assert rc == 2 and "--output" in err


@pytest.mark.parametrize("flags", [["--temperature", "-1"], ["--top-p", "0"], ["--max-new-tokens", "0"]],
                         ids=lambda f: " ".join(f))
def test_bad_request_fails_before_weights_are_read(cli_pair, capsys, monkeypatch, flags):
    def forbidden(*args, **kwargs):
        raise AssertionError("weights were read before the request was validated")

    monkeypatch.setattr(ckpt, "load_safetensors_dir", forbidden)
    rc, out, err = run_main(capsys, *generate_args(cli_pair, "--device", "cpu", *flags))
    assert_clean_error(rc, out, err, flags[0].lstrip("-").replace("-", "_"))


def test_block_size_is_a_deprecated_alias_of_verify_len(cli_pair, capsys):
    """--block-size once meant the verify length here; it still works, with one warning line (block_size is the
    drafter's B)."""
    rc, out, err = run_main(capsys, *generate_args(cli_pair, "--max-new-tokens", 4, "--block-size", 4, "--device", "cpu",
                                                   "--json"))
    assert rc == 0, err
    assert json.loads(out)["stats"]["verify_len"] == 4
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dflash-trt generate: warning: block_size is deprecated") \
        and "--verify-len" in lines[0]
