"""`dflash-trt bench` argument parsing. dflash_trt/cli.py registers it with one line:

    from dflash_trt.bench.cli import add_bench_parser; add_bench_parser(sub)

Bad input raises a DFlashError subclass (naming the flag and the fix); the top-level CLI prints it as one line.
"""

from __future__ import annotations

import argparse


def add_bench_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench", help="benchmark DFlash vs AR on prompt sets: τ, acceptance, decode speedup, losslessness",
        description="Run FastChat-style prompt sets through the torch engine in AR mode and in DFlash mode on the "
                    "same batches; report mean τ, τ histogram, per-position acceptance, decode tokens/s, decode-only "
                    "speedup (TPOT_AR / TPOT_spec), efficiency (speedup / τ) and whether every output matched AR. "
                    "Writes DIR/report.json and PNG plots.")
    p.add_argument("--target", required=True, help="target checkpoint directory (Hugging Face format)")
    p.add_argument("--drafter", required=True, help="DFlash drafter directory (z-lab format)")
    p.add_argument("--dataset", action="append", required=True, metavar="FILE.jsonl",
                   help="FastChat-style JSONL ({\"turns\": [...]} per line; the first turn is the prompt); repeat for "
                        "several sets, each named by its file stem")
    p.add_argument("--num-prompts", type=int, default=None, help="first N prompts of each dataset (default: all)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=1, help="prompts per engine.generate call (default 1)")
    p.add_argument("--block-size", type=int, default=None, help="slots verified per step, 2..drafter block_size "
                                                                "(default: the drafter's)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy; > 0 samples with the same per-prompt "
                                                                  "seeds in both modes")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    p.add_argument("--dtype", default="auto", help="auto (the checkpoint's own), float32, bfloat16 or float16")
    p.add_argument("--seed", type=int, default=0, help="prompt g (over all datasets) uses seed + g (default 0)")
    p.add_argument("--warmup", type=int, default=1, help="untimed batches per mode before timing (default 1)")
    p.add_argument("--output", default="out/bench", help="directory for report.json and the plots (default out/bench)")
    p.add_argument("--max-seq-len", type=int, default=4096,
                   help="engine KV-cache length per sequence; longer prompts are cut from the left (default 4096)")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.set_defaults(func=run_bench_command)
    return p


def config_from_args(args):
    from dflash_trt.bench.runner import BenchConfig

    return BenchConfig(target=args.target, drafter=args.drafter, datasets=list(args.dataset),
                       num_prompts=args.num_prompts, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
                       block_size=args.block_size, temperature=args.temperature, device=args.device, dtype=args.dtype,
                       seed=args.seed, warmup=args.warmup, output=args.output, max_seq_len=args.max_seq_len)


def run_bench_command(args) -> int:
    from dflash_trt.bench.runner import format_table, run_bench

    report = run_bench(config_from_args(args), progress=not getattr(args, "no_progress", False))
    print(format_table(report))
    files = report.get("files", {})
    print(f"report: {files.get('report')}")
    print(f"plots:  {files.get('acceptance_plot')}  {files.get('tau_histogram_plot')}")
    if not report["overall"]["all_match_ar"]:
        bad = {name: d["num_prompts"] - d["num_match_ar"] for name, d in report["datasets"].items() if not d["all_match_ar"]}
        print(f"warning: DFlash output differs from AR for {bad} prompt(s); see 'mismatches' in the report")
    return 0
