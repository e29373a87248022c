"""`dflash-trt bench`: the metrics on hand-made Stats, prompt-set parsing and formatting, plots, an end-to-end run on
the tiny random pair (batch 1 and 2, greedy and sampled; greedy runs also run transformers' generate as a baseline and
match it token for token), the --block-size alias of --verify-len, and one clean DFlashError per bad input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from dflash_trt.bench import metrics
from dflash_trt.bench.cli import add_bench_parser, run_bench_command
from dflash_trt.bench.datasets import (DatasetError, encode_prompt, format_prompt, load_prompt_set, load_prompt_sets)
from dflash_trt.bench.plots import write_plots
from dflash_trt.bench.runner import BenchConfig, format_table
from dflash_trt.errors import ConfigError, DFlashError
from dflash_trt.spec.stats import Stats

# ---------------------------------------------------------------------------------------------------------------------
# metrics: pure functions on hand-made Stats
# ---------------------------------------------------------------------------------------------------------------------


def _stats(taus, new_tokens, prefill_s=0.5, decode_s=2.0, k=4):
    return Stats(verify_len=k, taus=list(taus), new_tokens=new_tokens, prefill_s=prefill_s, decode_s=decode_s)


def test_batch_timing_counts_shared_times_once():
    batch = [_stats([1, 2], 4, 0.5, 2.0), _stats([3], 5, 0.5, 2.0), _stats([], 1, 0.5, 2.0)]
    t = metrics.batch_timing(batch)
    assert (t.prefill_s, t.decode_s) == (0.5, 2.0)  # not 1.5 / 6.0
    assert t.decode_tokens == 3 + 4 + 0  # new_tokens - 1 per sequence: the first token is prefill's
    assert (t.new_tokens, t.sequences) == (10, 3)
    assert metrics.decode_tokens(_stats([], 0)) == 0
    with pytest.raises(ValueError):
        metrics.batch_timing([])


def test_tpot_speedup_efficiency():
    ar = [metrics.BatchTiming(0.1, 1.0, 10, 11, 1), metrics.BatchTiming(0.1, 3.0, 30, 31, 1)]
    spec = [metrics.BatchTiming(0.1, 0.5, 10, 11, 1), metrics.BatchTiming(0.1, 0.5, 30, 31, 1)]
    assert metrics.tpot(ar) == pytest.approx(4.0 / 40)
    assert metrics.tpot(spec) == pytest.approx(1.0 / 40)
    assert metrics.tokens_per_s(metrics.tpot(ar)) == pytest.approx(10.0)
    sx = metrics.speedup(metrics.tpot(ar), metrics.tpot(spec))
    assert sx == pytest.approx(4.0)
    assert metrics.efficiency(sx, 5.0) == pytest.approx(0.8)
    # undefined -> None, never a ZeroDivisionError or NaN
    assert metrics.tpot([metrics.BatchTiming(0.1, 0.0, 0, 1, 1)]) is None
    assert metrics.tpot([]) is None
    assert metrics.tokens_per_s(None) is None and metrics.tokens_per_s(0.0) is None
    assert metrics.speedup(None, 0.1) is None and metrics.speedup(0.1, None) is None and metrics.speedup(0.1, 0.0) is None
    assert metrics.efficiency(None, 2.0) is None and metrics.efficiency(2.0, None) is None
    assert metrics.efficiency(2.0, 0.0) is None


def test_mode_summary():
    s = metrics.mode_summary([metrics.BatchTiming(0.5, 1.0, 9, 10, 2), metrics.BatchTiming(0.5, 1.0, 11, 12, 2)])
    assert s["batches"] == 2 and s["sequences"] == 4 and s["new_tokens"] == 22 and s["decode_tokens"] == 20
    assert s["prefill_s"] == 1.0 and s["decode_s"] == 2.0
    assert s["tpot_s"] == pytest.approx(0.1) and s["decode_tokens_per_s"] == pytest.approx(10.0)
    assert s["e2e_tokens_per_s"] == pytest.approx(22 / 3.0)
    assert metrics.mode_summary([])["tpot_s"] is None


def test_acceptance_pooled_over_sequences():
    # K = 4: τ in 1..4; per-position [k-1] = share of steps with τ > k
    acc = metrics.acceptance_summary([_stats([1, 3, 4], 9), _stats([2], 3)], verify_len=4)
    assert acc["steps"] == 4
    assert acc["mean_tau"] == pytest.approx(2.5)
    assert acc["histogram"] == [1, 1, 1, 1]
    assert acc["histogram_fraction"] == [0.25] * 4
    assert acc["per_position_acceptance"] == pytest.approx([0.75, 0.5, 0.25])
    pooled = metrics.pool_stats([_stats([1, 3, 4], 9), _stats([2], 3)])
    assert pooled.taus == [1, 3, 4, 2] and pooled.decode_s == 0.0  # per-batch times are not pooled here
    empty = metrics.acceptance_summary([_stats([], 1)], verify_len=4)
    assert empty["mean_tau"] is None and empty["histogram"] == [0, 0, 0, 0]
    assert empty["per_position_acceptance"] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        metrics.pool_stats([Stats(verify_len=2, taus=[3])], verify_len=2)


def test_steps_by_draft_are_pooled_and_shown_where_more_than_one_ran():
    # what the torch scheduler records per request (Stats.count_draft): a fixed draft's one label, auto's several
    fixed, mixed = _stats([2, 3], 5), _stats([1, 4, 2], 7)
    fixed.count_draft("chain:4", 2)
    mixed.count_draft("chain:1", 1)
    mixed.count_draft("tree:16", 1)
    mixed.count_draft("chain:4", 1)
    acc = metrics.acceptance_summary([fixed, mixed], verify_len=4)
    assert acc["draft_steps"] == {"chain:4": 3, "chain:1": 1, "tree:16": 1} and sum(acc["draft_steps"].values()) == 5
    assert "draft_steps" not in fixed.summary() and fixed.to_dict()["draft_steps"] == {"chain:4": 2}
    assert "draft_steps={chain:1: 1, chain:4: 1, tree:16: 1}" in mixed.summary()  # chains by K, then trees
    report = _synthetic_report()
    assert "steps by draft" not in format_table(report)
    report["overall"]["draft_steps"] = acc["draft_steps"]
    assert "steps by draft (overall): chain:1: 1, chain:4: 3, tree:16: 1" in format_table(report)


def test_compare_outputs():
    assert metrics.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert metrics.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert metrics.first_divergence([1, 2], [1, 2, 3]) == 2
    c = metrics.compare_outputs([[1, 2], [3, 4], [5]], [[1, 2], [3, 9], [5]])
    assert c["all_match_ar"] is False and c["num_match_ar"] == 2
    assert c["mismatches"] == [{"prompt": 1, "first_divergence": 1, "ar_tokens": 2, "spec_tokens": 2}]
    assert metrics.compare_outputs([[1]], [[1]])["all_match_ar"] is True
    with pytest.raises(ValueError):
        metrics.compare_outputs([[1]], [])


def test_summarize_hand_example():
    ar_t = [metrics.BatchTiming(0.1, 2.0, 8, 10, 2)]
    sp_t = [metrics.BatchTiming(0.1, 0.5, 8, 10, 2)]
    spec = [_stats([4, 1], 5), _stats([2, 1], 5)]
    s = metrics.summarize(ar_t, sp_t, spec, [[1] * 5, [2] * 5], [[1] * 5, [2] * 5], verify_len=4)
    assert s["num_prompts"] == 2
    assert s["mean_tau"] == pytest.approx(2.0)
    assert s["speedup"] == pytest.approx(4.0) and s["efficiency"] == pytest.approx(2.0)
    assert s["tpot_ar_s"] == pytest.approx(0.25) and s["tokens_per_s_spec"] == pytest.approx(16.0)
    assert s["all_match_ar"] is True and s["histogram"] == [2, 1, 0, 1] and s["verify_len"] == 4
    assert s["e2e_tokens_per_s_ar"] == pytest.approx(10 / 2.1) and s["e2e_tokens_per_s_spec"] == pytest.approx(10 / 0.6)
    assert s["e2e_speedup"] == pytest.approx(2.1 / 0.6)
    assert s["hf"] is None and s["tokens_per_s_hf"] is None and s["hf_all_match_ar"] is None  # no baseline given


def test_summarize_with_transformers_baseline():
    ar_t = [metrics.BatchTiming(0.1, 2.0, 8, 10, 2)]  # TPOT 0.25, e2e 10 / 2.1
    sp_t = [metrics.BatchTiming(0.1, 0.5, 8, 10, 2)]  # TPOT 0.0625, e2e 10 / 0.6
    hf_t = [metrics.BatchTiming(0.2, 3.0, 4, 5, 1), metrics.BatchTiming(0.2, 1.0, 4, 5, 1)]  # per prompt: TPOT 0.5
    spec = [_stats([4, 1], 5), _stats([2, 1], 5)]
    ar_out = [[1] * 5, [2] * 5]
    s = metrics.summarize(ar_t, sp_t, spec, ar_out, ar_out, verify_len=4, hf_timings=hf_t,
                          hf_outputs=[[1] * 5, [2, 2, 3, 2, 2]])
    assert s["hf"]["batches"] == 2 and s["hf"]["sequences"] == 2 and s["hf"]["new_tokens"] == 10
    assert s["tpot_hf_s"] == pytest.approx(0.5) and s["tokens_per_s_hf"] == pytest.approx(2.0)
    assert s["speedup_ar_vs_hf"] == pytest.approx(0.5 / 0.25) and s["speedup_spec_vs_hf"] == pytest.approx(0.5 / 0.0625)
    assert s["e2e_tokens_per_s_hf"] == pytest.approx(10 / 4.4)
    assert s["e2e_speedup_ar_vs_hf"] == pytest.approx((10 / 2.1) / (10 / 4.4))
    assert s["e2e_speedup_spec_vs_hf"] == pytest.approx((10 / 0.6) / (10 / 4.4))
    assert s["hf_all_match_ar"] is False and s["hf_num_match_ar"] == 1
    assert s["hf_mismatches"] == [{"prompt": 1, "first_divergence": 2, "ar_tokens": 5, "hf_tokens": 5}]
    assert s["all_match_ar"] is True  # DFlash vs AR is a separate comparison


# ---------------------------------------------------------------------------------------------------------------------
# prompt sets
# ---------------------------------------------------------------------------------------------------------------------


def _write_jsonl(path: Path, turns: list[list[str]], extra_lines: list[str] = ()) -> Path:
    lines = [json.dumps({"question_id": i, "category": "t", "turns": t}) for i, t in enumerate(turns)]
    path.write_text("\n".join(lines + list(extra_lines)) + "\n", encoding="utf-8")
    return path


def test_load_prompt_set_first_turn_and_limit(tmp_path):
    p = _write_jsonl(tmp_path / "my_set.jsonl", [["first a", "second a"], ["first b"], ["first c"]])
    s = load_prompt_set(p)
    assert s.name == "my_set" and s.turns == ["first a", "first b", "first c"]
    assert load_prompt_set(p, 2).turns == ["first a", "first b"]
    assert load_prompt_set(p, 10).turns == s.turns  # fewer lines than asked: all of them
    # only the selected lines are parsed: a bad line past the limit does not matter
    q = _write_jsonl(tmp_path / "tail.jsonl", [["x"]], ["", "{not json"])
    assert load_prompt_set(q, 1).turns == ["x"]


@pytest.mark.parametrize("content,needle", [
    ('{"question_id": 1}\n', "'turns'"),
    ('{"turns": "just a string"}\n', "'turns' must be a non-empty list"),
    ('{"turns": []}\n', "'turns' must be a non-empty list"),
    ('{"turns": [""]}\n', "first turn is empty"),
    ('[1, 2]\n', "not an object"),
    ('{"turns": ["a"]\n', "not valid JSON"),
    ('\n\n', "has no prompts"),
])
def test_bad_prompt_files(tmp_path, content, needle):
    p = tmp_path / "bad.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError) as e:
        load_prompt_set(p)
    assert needle in str(e.value) and "--dataset" in str(e.value)
    assert isinstance(e.value, DFlashError)


def test_missing_and_duplicate_datasets(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_prompt_set(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="is a directory"):
        load_prompt_set(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _write_jsonl(tmp_path / "a" / "same.jsonl", [["x"]])
    b = _write_jsonl(tmp_path / "b" / "same.jsonl", [["y"]])
    with pytest.raises(DatasetError, match="same name 'same'"):
        load_prompt_sets([a, b])
    with pytest.raises(DatasetError, match="--num-prompts"):
        load_prompt_set(a, 0)


class _ChatTok:
    """A minimal tokenizer with a chat template: one token per character."""

    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        return f"<u>{messages[0]['content']}</u><a>"

    def __call__(self, text, add_special_tokens=True):
        assert add_special_tokens is False
        return {"input_ids": [ord(c) for c in text]}


def test_format_and_truncate():
    tok = _ChatTok()
    assert format_prompt(tok, "hi") == "<u>hi</u><a>"
    ids, cut = encode_prompt(tok, "hi", 100)
    assert "".join(map(chr, ids)) == "<u>hi</u><a>" and not cut
    ids, cut = encode_prompt(tok, "hello", 5)  # cut from the left: the generation prompt survives
    assert "".join(map(chr, ids)) == "/u><a>"[-5:] and cut
    tok.chat_template = None
    assert format_prompt(tok, "hi") == "hi"
    with pytest.raises(DatasetError, match="no tokenizer"):
        encode_prompt(None, "hi", 10)


def test_chat_template_with_real_tokenizer(make_pair):
    from dflash_trt.checkpoint import load_tokenizer

    tok = load_tokenizer(make_pair()[0])
    assert not tok.chat_template  # the tiny tokenizer has none: raw text
    assert encode_prompt(tok, "The answer is", 100)[0] == tok("The answer is", add_special_tokens=False)["input_ids"]
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    assert format_prompt(tok, "hi") == "<|user|>hi<|assistant|>"
    ids, cut = encode_prompt(tok, "hi", 100)
    assert tok.decode(ids) == "<|user|>hi<|assistant|>" and not cut


# ---------------------------------------------------------------------------------------------------------------------
# report rendering on a synthetic report
# ---------------------------------------------------------------------------------------------------------------------


def _synthetic_report() -> dict:
    ds = {}
    for name, taus in (("alpha", [1, 2, 4, 4, 3]), ("beta", [1, 1, 2])):
        t = [metrics.BatchTiming(0.1, 1.0, 20, 21, 1)]
        s = metrics.summarize(t, [metrics.BatchTiming(0.1, 0.5, 20, 21, 1)], [_stats(taus, 21)], [[1]], [[1]], 4)
        ds[name] = s
    overall = metrics.summarize([], [], [_stats([1, 2, 4, 4, 3, 1, 1, 2], 42)], [[1], [1]], [[1], [2]], 4)
    return {"settings": {"verify_len": 4, "temperature": 0.0, "batch_size": 1, "max_new_tokens": 21, "dtype": "float32"},
            "device": {"type": "cpu", "name": "test"}, "torch_version": "x", "datasets": ds, "overall": overall}


def test_plots_and_table_from_report(tmp_path):
    report = _synthetic_report()
    files = write_plots(report, tmp_path)
    for p in files.values():
        assert p.is_file() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000
    table = format_table(report)
    lines = table.splitlines()
    assert any(line.startswith("alpha") for line in lines) and any(line.startswith("overall") for line in lines)
    assert "2.00x" in table  # speedup 1.0 / 0.5
    assert "NO (1/2)" in table and "-" in next(line for line in lines if line.startswith("overall"))


# ---------------------------------------------------------------------------------------------------------------------
# end to end on the tiny random pair
# ---------------------------------------------------------------------------------------------------------------------

PROMPTS_A = [["The answer is"], ["def add(a, b):"], ["Write a short poem about the sea."], ["unused fourth"]]
PROMPTS_B = [["1 + 1 = 2, 2 + 2 ="], ["Natalia sold clips to 48 of her friends in April"], ["Speculative decoding"]]


def _parser():
    parser = argparse.ArgumentParser(prog="dflash-trt")
    sub = parser.add_subparsers(dest="command", required=True)
    add_bench_parser(sub)
    return parser


def _run(argv) -> int:
    """What dflash_trt.cli.main does: parse, run, turn a DFlashError into exit 2 (re-raised here for inspection)."""
    args = _parser().parse_args([str(a) for a in argv])
    return args.func(args)


@pytest.fixture(scope="module")
def prompt_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("prompts")
    return _write_jsonl(d / "set_a.jsonl", PROMPTS_A), _write_jsonl(d / "set_b.jsonl", PROMPTS_B)


def test_parser_defaults():
    args = _parser().parse_args(["bench", "--target", "t", "--drafter", "d", "--dataset", "x.jsonl",
                                 "--dataset", "y.jsonl"])
    assert args.func is run_bench_command and args.dataset == ["x.jsonl", "y.jsonl"]
    assert (args.num_prompts, args.batch_size, args.verify_len, args.temperature, args.warmup, args.seed) == \
        (None, 1, None, 0.0, 1, 0)
    assert args.block_size is None and args.hf_baseline is True
    assert args.device is None and args.dtype == "auto" and args.max_seq_len is None  # the engine default: 2048 or max_position_embeddings


@pytest.mark.parametrize("batch_size,temperature,verify_len", [(1, 0.0, None), (2, 0.0, None), (2, 0.8, 4)])
def test_bench_end_to_end(make_pair, prompt_files, tmp_path, capsys, batch_size, temperature, verify_len):
    target, drafter = make_pair()
    out = tmp_path / "bench"
    argv = ["bench", "--target", target, "--drafter", drafter, "--dataset", prompt_files[0], "--dataset",
            prompt_files[1], "--num-prompts", 3, "--max-new-tokens", 8, "--batch-size", batch_size,
            "--temperature", temperature, "--seed", 7, "--output", out]
    if verify_len:
        argv += ["--verify-len", verify_len, "--warmup", 0]
    assert _run(argv) == 0
    captured = capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    k = verify_len or 16
    assert report["settings"]["verify_len"] == k and report["settings"]["batch_size"] == batch_size
    assert report["settings"]["drafter_block_size"] == 16 and "block_size" not in report["settings"]
    assert report["settings"]["temperature"] == temperature and report["settings"]["chat_template"] is False
    assert report["settings"]["graphs_captured_up_front"] == 0  # (no CUDA graphs on a CPU)
    assert report["device"]["type"] == "cpu" and report["torch_version"] and report["date"]
    assert report["report_version"] == 2 and report["notes"]
    assert set(report["datasets"]) == {"set_a", "set_b"}
    greedy = temperature == 0.0
    hf_info = report["hf_baseline"]
    assert hf_info["ran"] is greedy and hf_info["batch_size"] == 1
    for name, d in [*report["datasets"].items(), ("overall", report["overall"])]:
        assert d["num_prompts"] == (6 if name == "overall" else 3)
        assert 1.0 <= d["mean_tau"] <= k, name
        assert d["verify_len"] == k
        assert d["speedup"] > 0 and d["efficiency"] == pytest.approx(d["speedup"] / d["mean_tau"])
        assert d["all_match_ar"] is True and d["mismatches"] == []
        assert d["tokens_per_s_ar"] > 0 and d["tokens_per_s_spec"] > 0
        assert d["e2e_tokens_per_s_ar"] > 0 and d["e2e_tokens_per_s_spec"] > 0
        assert d["tpot_ar_s"] > 0 and d["tpot_spec_s"] > 0
        assert d["speedup"] == pytest.approx(d["tpot_ar_s"] / d["tpot_spec_s"])
        assert len(d["histogram"]) == k and sum(d["histogram"]) == d["steps"] > 0
        assert len(d["per_position_acceptance"]) == k - 1
        assert all(0.0 <= a <= 1.0 for a in d["per_position_acceptance"])
        assert d["ar"]["new_tokens"] == d["spec"]["new_tokens"] and d["ar"]["batches"] == d["spec"]["batches"]
        batches_per_set = {1: 3, 2: 2}[batch_size]  # 3 prompts per set, batches never span two sets
        assert d["ar"]["batches"] == (2 if name == "overall" else 1) * batches_per_set
        if greedy:  # transformers' greedy generate: one prompt per call, the same tokens as our AR (float32, batch 1)
            assert d["hf"]["batches"] == d["hf"]["sequences"] == d["num_prompts"]
            assert d["hf"]["new_tokens"] == d["ar"]["new_tokens"]
            assert d["hf_all_match_ar"] is True and d["hf_num_match_ar"] == d["num_prompts"] and d["hf_mismatches"] == []
            assert d["tokens_per_s_hf"] > 0 and d["e2e_tokens_per_s_hf"] > 0
            assert d["speedup_ar_vs_hf"] == pytest.approx(d["tpot_hf_s"] / d["tpot_ar_s"])
            assert d["speedup_spec_vs_hf"] == pytest.approx(d["tpot_hf_s"] / d["tpot_spec_s"])
            assert d["e2e_speedup_spec_vs_hf"] == pytest.approx(d["e2e_tokens_per_s_spec"] / d["e2e_tokens_per_s_hf"])
        else:
            assert d["hf"] is None and d["tokens_per_s_hf"] is None and d["hf_all_match_ar"] is None
    for d in report["datasets"].values():
        assert [p["seed"] for p in d["per_prompt"]] == sorted(p["seed"] for p in d["per_prompt"])
        assert all(p["hf_match_ar"] is (True if greedy else None) for p in d["per_prompt"])
        assert len(d.get("hf_prompt_timings", [])) == (3 if greedy else 0)
    assert [p["seed"] for d in report["datasets"].values() for p in d["per_prompt"]] == list(range(7, 13))
    if greedy:
        assert hf_info["dtype"] == "float32" and hf_info["device"] == "cpu" and hf_info["transformers_version"]
        assert hf_info["generate"]["do_sample"] is False and hf_info["generate"]["use_cache"] is True
        assert any("streamer" in n for n in report["notes"])
        assert ("note" in hf_info) is (batch_size > 1)  # our batches vs its batch 1, said in the report
        assert "transformers (batch 1)" in captured.out
    else:
        assert "temperature" in hf_info["skipped"] and "transformers baseline: skipped" in captured.out
    for png in ("acceptance_per_position.png", "tau_histogram.png"):
        assert (out / png).stat().st_size > 1000
    assert "set_a" in captured.out and "overall" in captured.out and "report.json" in captured.out
    assert f"K={k}" in captured.out and "ours DFlash" in captured.out
    assert "seq/s" in captured.err and "100%" in captured.err  # the tqdm bar
    assert "deprecated" not in captured.err


def test_block_size_alias_and_no_hf_baseline(make_pair, prompt_files, tmp_path, capsys):
    """--block-size still sets K (one warning line); --no-hf-baseline skips transformers (greedy, where it would run)."""
    target, drafter = make_pair()
    out = tmp_path / "alias"
    argv = ["bench", "--target", target, "--drafter", drafter, "--dataset", prompt_files[0], "--num-prompts", 1,
            "--max-new-tokens", 4, "--warmup", 0, "--no-progress", "--output", out, "--no-hf-baseline"]
    from dflash_trt import cli

    assert cli.main([str(a) for a in [*argv, "--block-size", 4]]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if "deprecated" in line]
    assert warnings == ["dflash-trt bench: warning: block_size is deprecated for the verify length: use --verify-len "
                        "(block_size is the drafter's block)"]
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["verify_len"] == 4 and report["overall"]["verify_len"] == 4
    assert report["settings"]["hf_baseline"] is False
    assert report["hf_baseline"]["ran"] is False and "--no-hf-baseline" in report["hf_baseline"]["skipped"]
    assert report["overall"]["hf"] is None and "hf_prompt_timings" not in report["datasets"]["set_a"]
    assert "transformers baseline: skipped (disabled (--no-hf-baseline))" in captured.out
    assert "transformers (batch 1)" not in captured.out
    # both names, same value: fine (still the one warning); different values: an error naming both, before loading
    assert cli.main([str(a) for a in [*argv, "--block-size", 4, "--verify-len", 4]]) == 0
    assert capsys.readouterr().err.count("deprecated") == 1
    with pytest.raises(DFlashError) as e:
        _run(["bench", "--target", tmp_path / "none", "--drafter", tmp_path / "none", "--dataset", prompt_files[0],
              "--verify-len", 4, "--block-size", 8, "--output", tmp_path / "o"])
    assert "--verify-len 4" in str(e.value) and "block_size 8" in str(e.value) and "disagree" in str(e.value)


def test_top_level_cli_prints_the_alias_warning_once(prompt_files, tmp_path, capsys):
    from dflash_trt import cli

    try:
        cli.build_parser().parse_args(["bench", "--target", "t", "--drafter", "d", "--dataset", "x"])
    except SystemExit:
        pytest.skip("dflash_trt/cli.py does not register `bench` yet")
    rc = cli.main(["bench", "--target", "t", "--drafter", "d", "--dataset", str(prompt_files[0]), "--block-size", "4",
                   "--num-prompts", "0", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 2 and "deprecated" in err[0] and "--num-prompts" in err[1]


@pytest.mark.parametrize("extra,needle", [
    (["--num-prompts", 0], "--num-prompts"),
    (["--max-new-tokens", 0], "--max-new-tokens"),
    (["--batch-size", 0], "--batch-size"),
    (["--warmup", -1], "--warmup"),
    (["--temperature", -1], "--temperature"),
    (["--verify-len", 1], "--verify-len"),
    (["--block-size", 1], "--verify-len"),  # the deprecated alias: the same check
    (["--max-new-tokens", 5000, "--max-seq-len", 4096], "--max-seq-len"),
    (["--dtype", "int8"], "dtype"),
])
def test_bad_arguments_fail_before_loading(prompt_files, tmp_path, extra, needle):
    # target/drafter do not exist: these errors must come before any model is read
    argv = ["bench", "--target", tmp_path / "no_target", "--drafter", tmp_path / "no_drafter", "--dataset",
            prompt_files[0], "--output", tmp_path / "o", *extra]
    with pytest.raises(ConfigError) as e:
        _run(argv)
    assert needle in str(e.value)


def test_bad_inputs(make_pair, prompt_files, tmp_path):
    target, drafter = make_pair()
    base = ["bench", "--target", target, "--drafter", drafter, "--num-prompts", 1, "--max-new-tokens", 2,
            "--warmup", 0, "--no-progress", "--output", tmp_path / "o"]
    with pytest.raises(DatasetError, match="does not exist"):
        _run(base + ["--dataset", tmp_path / "missing.jsonl"])
    no_turns = tmp_path / "no_turns.jsonl"
    no_turns.write_text('{"question_id": 1, "prompt": "hi"}\n')
    with pytest.raises(DatasetError, match="line 1 has no 'turns' field"):
        _run(base + ["--dataset", no_turns])
    with pytest.raises(ConfigError, match=r"--verify-len must be in 2\.\.16"):
        _run(base + ["--dataset", prompt_files[0], "--verify-len", 17])
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="--output .* is a file"):
        _run([*base[:-1], a_file, "--dataset", prompt_files[0]])
    with pytest.raises(DFlashError):  # the engine's own checkpoint validation
        _run([*base, "--dataset", prompt_files[0], "--drafter", tmp_path / "nowhere"])


def test_top_level_cli_wiring(prompt_files, tmp_path, capsys):
    """Once dflash_trt/cli.py registers `bench`, a bad input is one line on stderr and exit 2."""
    from dflash_trt import cli

    try:
        cli.build_parser().parse_args(["bench", "--target", "t", "--drafter", "d", "--dataset", "x"])
    except SystemExit:
        pytest.skip("dflash_trt/cli.py does not register `bench` yet")
    rc = cli.main(["bench", "--target", "t", "--drafter", "d", "--dataset", str(prompt_files[0]),
                   "--num-prompts", "0", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--num-prompts" in err and "Traceback" not in err


def test_config_validate_is_cheap():
    with pytest.raises(ConfigError, match="--dataset"):
        BenchConfig("t", "d", []).validate()
    with pytest.raises(ConfigError, match="--seed"):
        BenchConfig("t", "d", ["x"], seed=-1).validate()
    assert BenchConfig("t", "d", ["x"]).validate().max_seq_len is None  # the engine's default
    with pytest.raises(ConfigError, match="--verify-len"):
        BenchConfig("t", "d", ["x"], verify_len=1).validate()


def test_openai_bench_serves_a_pair_or_an_engine_directory():
    """bench_openai_server's server command per mode: from --target / --drafter (AR without the drafter), or from a
    built engine directory (AR: the same directory with --no-draft; its manifest's device and dtype unless given)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_openai_server",
                                                  Path(__file__).resolve().parents[1] / "scripts" / "bench_openai_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = argparse.Namespace(target="T", drafter="D", engine_dir=None, device=None, dtype=None, torch_threads=1,
                              max_batch_size=16, max_seq_len=512, verify_len=None)

    def flags(cmd):
        return " ".join(cmd[cmd.index("serve"):])

    ar, auto = flags(module.server_command("ar", args, 1)), flags(module.server_command("auto", args, 1))
    assert "--target T" in ar and "--no-draft" in ar and "--drafter" not in ar and "--device cpu --dtype float32" in ar
    assert "--drafter D" in auto and auto.endswith("--draft auto") and "--engine-dir" not in auto
    args.engine_dir = "E"
    ar, dflash = flags(module.server_command("ar", args, 1)), flags(module.server_command("dflash", args, 1))
    assert "--engine-dir E --no-draft" in ar and "--target" not in ar and "--device" not in ar
    assert "--engine-dir E" in dflash and "--no-draft" not in dflash and "--draft" not in dflash
    args.device = "cuda"
    assert "--device cuda" in flags(module.server_command("chain:8", args, 1))


def test_throughput_at_fixed_interactivity_interpolates_bounds_and_says_na():
    """bench_openai_server's ratio at the per-user rate AR reaches at the reference concurrency: interpolated along a
    curve that spans the rate; for a curve that stays above it (every level serves its users faster), at least the
    most total tok/s of its levels, not n/a (an H200 run read n/a for every drafting mode); n/a for one below it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_openai_server",
                                                  Path(__file__).resolve().parents[1] / "scripts" / "bench_openai_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    curves = {"ar": [(100, 100), (80, 160), (60, 240), (40, 320)], "span": [(120, 120), (70, 280), (50, 400)],
              "above": [(150, 150), (110, 440), (90, 720)], "below": [(50, 50), (30, 120)]}
    rows = [{"mode": m, "concurrency": 2 ** i, "per_user_tokens_per_s": u, "total_tokens_per_s": t}
            for m, pts in curves.items() for i, (u, t) in enumerate(pts)]
    fixed = module.fixed_interactivity(rows, list(curves), reference_concurrency=4)
    assert fixed["per_user_tokens_per_s"] == 60
    got = fixed["modes"]
    assert got["ar"]["total_tokens_per_s"] == 240 and got["ar"]["vs_ar"] == 1
    assert got["span"]["total_tokens_per_s"] == pytest.approx(340) and got["span"]["at_least_tokens_per_s"] is None
    assert got["above"]["total_tokens_per_s"] is None and got["above"]["at_least_tokens_per_s"] == 720
    assert got["above"]["vs_ar_at_least"] == pytest.approx(3.0)
    assert got["below"]["total_tokens_per_s"] is None and got["below"]["at_least_tokens_per_s"] is None
    assert module._fixed_cell("above", got["above"]) == "above >= 720.0 tok/s (>= 3.00x)"
    assert module._fixed_cell("below", got["below"]) == "below n/a"


def test_percentile_is_the_sample_value_at_the_rounded_rank():
    """The benchmarks' p50 / p90 (TTFT, TPOT, host time): a value of the sample, at rank round(q * (n - 1))."""
    assert metrics.percentile([3.0], 0.9) == 3.0
    assert metrics.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 3.0  # rank round(1.5) = 2 of [1, 2, 3, 4]
    assert metrics.percentile(list(range(10, 0, -1)), 0.9) == 9  # rank round(8.1) = 8
    assert metrics.percentile([5.0, 7.0], 0.0) == 5.0 and metrics.percentile([5.0, 7.0], 1.0) == 7.0


def test_draft_budget_bench_frees_each_batch_size_engine_before_the_next(monkeypatch, capsys, tmp_path):
    """scripts/bench_draft_budget.py builds one engine per batch size; the last one must be gone before the next is
    built (and so before its timed part). An engine's objects hold reference cycles, so without an explicit collection
    it lived on until the cyclic collector ran, inside a later timed part: on an H200 its teardown cost one mode's
    windows ~150-200 ms (auto / best fixed at batch 8 read 0.68-0.70 after batch 1 in the same process, 0.95 alone).
    The collector is off here, so only the bench's own collection can free it."""
    import gc
    import importlib.util
    import weakref

    from dflash_trt.engines.torch_engine import TorchEngine
    from dflash_trt.spec import budget

    spec = importlib.util.spec_from_file_location("bench_draft_budget",
                                                  Path(__file__).resolve().parents[1] / "scripts" / "bench_draft_budget.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for cls in (budget.AutoBudget, budget.Fixed):  # the bench wraps these to record step times: undone after the test
        monkeypatch.setattr(cls, "observe_time", cls.observe_time)
    built, alive_at_build = [], []
    original = TorchEngine.from_pretrained.__func__

    def from_pretrained(cls, *args, **kwargs):
        alive_at_build.append([ref() is not None for ref in built])
        engine = original(cls, *args, **kwargs)
        built.append(weakref.ref(engine))
        return engine

    monkeypatch.setattr(TorchEngine, "from_pretrained", classmethod(from_pretrained))
    enabled = gc.isenabled()
    gc.disable()
    try:
        assert module.main(["--batch-sizes", "1,2", "--num-prompts", "2", "--max-new-tokens", "4",
                            "--modes", "chain:4", "--output", str(tmp_path)]) == 0
    finally:
        if enabled:
            gc.enable()
    assert "batch 2 (cpu" in capsys.readouterr().out
    assert alive_at_build == [[], [False]]
    # the host time on the critical path: every window but a generate() call's first is timed from the read before it,
    # and each call's first from the call (less its prefill)
    report = json.loads((tmp_path / "results.json").read_text())
    for size, calls in (("1", 2), ("2", 1)):
        res = report["results"][size]
        for mode, row in res["rows"].items():
            host = res["host_ms"][mode]
            assert host["before_first_window_ms"]["count"] == calls, (size, mode)
            assert host["between_windows_ms"]["count"] == row["windows"] - calls, (size, mode)
            assert 0 < host["before_first_window_ms"]["median"] < 1e3


def test_draft_budget_bench_runs_every_mode_after_every_other_equally_often():
    """scripts/bench_draft_budget.py interleaves the modes batch by batch: over a cycle of its orders every mode runs in
    every place equally often (a drifting machine hits all alike) and right after every other mode equally often (a
    run's cost depends on what ran before it). Rotated orders had auto run after tree:32 in 6 batches of 7."""
    import collections
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_draft_budget",
                                                  Path(__file__).resolve().parents[1] / "scripts" / "bench_draft_budget.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for n in range(2, 9):
        modes = [f"m{i}" for i in range(n)]
        cycle = n if n % 2 == 0 else 2 * n
        orders = module._orders(modes, 2 * cycle)
        assert orders[:cycle] == orders[cycle:]  # (a cycle, then again)
        assert all(sorted(order) == modes for order in orders)
        after = collections.Counter((a, b) for order in orders[:cycle] for a, b in zip(order, order[1:]))
        assert set(after) == {(a, b) for a in modes for b in modes if a != b}
        assert len(set(after.values())) == 1
        places = collections.Counter((i, mode) for order in orders[:cycle] for i, mode in enumerate(order))
        assert len(places) == n * n and len(set(places.values())) == 1


@pytest.mark.gpu
def test_bench_captures_every_step_shape_before_timing_on_gpu(tmp_path):
    """On a GPU, `dflash-trt bench --draft auto` captures every step shape of AR and auto before its warm-up and timed
    batches, as the servers do at start: no window inside them meets a new shape (auto meets more shapes than a fixed
    chain; on an H200 their first uses inside the timed part were 2-5 % of its time at batch 8-16, 2026-11-27)."""
    from test_step import PAIR, ROOT, require_gpu_plugins

    require_gpu_plugins()
    from dflash_trt.bench.runner import run_bench
    from dflash_trt.engines.torch_engine import TorchEngine

    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cuda", max_batch_size=4,
                                         max_seq_len=512)
    config = BenchConfig(str(PAIR / "target"), str(PAIR / "drafter"), [str(ROOT / "data/prompts/eagle_gsm8k.jsonl")],
                         num_prompts=12, max_new_tokens=48, batch_size=4, draft="auto", hf_baseline=False,
                         output=str(tmp_path))
    report = run_bench(config, engine=engine, progress=False, write=False)
    assert report["settings"]["graphs_captured_up_front"] > 0
    assert engine.step_runner.graphs and engine.step_runner.capture_s == 0.0  # (what windows spent on first uses)
