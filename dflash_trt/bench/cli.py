"""`dflash-trt bench` argument parsing. dflash_trt/cli.py registers it with one line:

    from dflash_trt.bench.cli import add_bench_parser; add_bench_parser(sub)

Bad input raises a DFlashError subclass (naming the flag and the fix); the top-level CLI prints it as one line.
"""

from __future__ import annotations

import argparse

from dflash_trt.capabilities import DECODE_LOOPS



def add_bench_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench", help="benchmark DFlash vs AR on prompt sets: τ, acceptance, decode speedup, losslessness",
        description="Run FastChat-style prompt sets through the torch engine in AR mode and in DFlash mode on the "
                    "same batches; report mean τ, τ histogram, per-position acceptance, decode tokens/s, decode-only "
                    "speedup (TPOT_AR / TPOT_spec), efficiency (speedup / τ) and whether every output matched AR. "
                    "Greedy runs on the torch engine also time transformers' own generate on the target (batch 1) "
                    "as a baseline. Writes DIR/report.json and PNG plots.")
    p.add_argument("--engine-dir", help="engine directory from `dflash-trt build` (instead of --target/--drafter; "
                                        "backend trtllm runs through TensorRT-LLM)")
    p.add_argument("--target", help="target checkpoint directory (Hugging Face format)")
    p.add_argument("--drafter", help="DFlash drafter directory (z-lab format)")
    p.add_argument("--dataset", action="append", required=True, metavar="FILE.jsonl",
                   help="FastChat-style JSONL ({\"turns\": [...]} per line; the first turn is the prompt); repeat for "
                        "several sets, each named by its file stem")
    p.add_argument("--num-prompts", type=int, default=None, help="first N prompts of each dataset (default: all)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=1, help="prompts per engine.generate call (default 1)")
    p.add_argument("--verify-len", type=int, default=None, metavar="K",
                   help="K, block slots the target verifies per step, 2..the drafter's block_size (default: all of them)")
    p.add_argument("--block-size", type=int, default=None, help=argparse.SUPPRESS)  # deprecated alias of --verify-len
    p.add_argument("--draft", default=None, metavar="chain:K|tree:N|auto",
                   help="DFlash mode's draft budget: chain:K (= --verify-len K), tree:N (a draft tree of N nodes) or "
                        "auto (K chosen per window; torch engine)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy; > 0 samples with the same per-prompt "
                                                                  "seeds in both modes")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    p.add_argument("--dtype", default="auto", help="auto (the checkpoint's own), float32, bfloat16 or float16")
    p.add_argument("--seed", type=int, default=0, help="prompt g (over all datasets) uses seed + g (default 0)")
    p.add_argument("--warmup", type=int, default=1, help="untimed batches per mode before timing (default 1)")
    p.add_argument("--output", default="out/bench", help="directory for report.json and the plots (default out/bench)")
    p.add_argument("--max-seq-len", type=int, default=None,
                   help="engine KV-cache length per sequence; longer prompts are cut from the left (default 2048, "
                        "or the target's max_position_embeddings if smaller)")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.add_argument("--no-hf-baseline", dest="hf_baseline", action="store_false",
                   help="skip the transformers generate() baseline (it runs by default for --temperature 0 on the torch "
                        "engine: same prompts, greedy, batch 1)")
    p.add_argument("--decode-loop", choices=DECODE_LOOPS, default="auto",
                   help="torch engine decode loop: auto (default: device where CUDA graphs run, else host), host (a "
                        "host read per step) or device (--steps-per-sync steps per host read; CUDA graphs + plugin "
                        "kernels on a GPU)")
    p.add_argument("--steps-per-sync", type=int, default=4)
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the torch engine's decode step (see `dflash-trt generate --help`); the report "
                        "gives each mode's warm-up time, which includes compiling")
    p.set_defaults(func=run_bench_command)
    return p


def verify_len_arg(args) -> int | None:
    """--verify-len, or its deprecated alias --block-size (the request layer's rule: a warning; both and different:
    an error)."""
    from dflash_trt.engines.requests import verify_len_from

    return verify_len_from(args.verify_len, getattr(args, "block_size", None), "--verify-len")


def config_from_args(args):
    from dflash_trt.bench.runner import BenchConfig

    return BenchConfig(target=args.target, drafter=args.drafter, datasets=list(args.dataset),
                       num_prompts=args.num_prompts, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
                       verify_len=verify_len_arg(args), draft=args.draft, temperature=args.temperature,
                       device=args.device,
                       dtype=args.dtype, seed=args.seed, warmup=args.warmup, output=args.output,
                       max_seq_len=args.max_seq_len, hf_baseline=getattr(args, "hf_baseline", True))


def open_engine_dir(args, config):
    """(engine, settings for the report) for --engine-dir: the torch engine with the build's runtime settings (dtype,
    max_seq_len), or both TensorRT-LLM modes of a trtllm engine directory."""
    from dflash_trt.errors import ConfigError
    from dflash_trt.manifest import load_manifest, runtime_budget

    if args.target or args.drafter:
        raise ConfigError("give either --engine-dir or --target/--drafter, not both (the engine directory names its own)")
    manifest = load_manifest(args.engine_dir)
    if manifest.get("backend") == "trtllm":
        from dflash_trt.engines.trtllm_engine import TrtllmBenchEngines

        engine = TrtllmBenchEngines(args.engine_dir)
    else:
        from dflash_trt.build.engine_dir import open_engine

        engine, manifest = open_engine(args.engine_dir, device=args.device,
                                       dtype=None if args.dtype == "auto" else args.dtype,
                                       max_batch_size=max(args.batch_size, 1), decode_loop=args.decode_loop,
                                       steps_per_sync=args.steps_per_sync, compile=args.compile)
    config.target, config.drafter = (manifest.get("target") or {}).get("path"), "drafter"
    config.verify_len, config.draft = runtime_budget(manifest, config.verify_len, config.draft)
    config.extra["engine_dir"] = str(args.engine_dir)
    config.extra["backend"] = manifest.get("backend")
    config.extra["drafter_quantization"] = (manifest.get("drafter") or {}).get("quantization")
    if (manifest.get("drafter") or {}).get("block_size") is not None:
        config.extra["drafter_block_size"] = manifest["drafter"]["block_size"]  # B (K is runtime.verify_len)
    return engine


def run_bench_command(args) -> int:
    from dflash_trt.bench.runner import format_table, run_bench
    from dflash_trt.errors import ConfigError

    config = config_from_args(args)
    if args.compile and args.warmup < 1:
        raise ConfigError("--compile needs --warmup >= 1: the first runs of each mode compile its steps, and those "
                          "seconds would be timed")
    engine = None
    if args.engine_dir:
        engine = open_engine_dir(args, config.validate())
    elif not args.target or not args.drafter:
        raise ConfigError("--target and --drafter (or --engine-dir) are required")
    else:
        from dflash_trt.engines.torch_engine import TorchEngine

        config.validate()
        engine = TorchEngine.from_pretrained(config.target, config.drafter, device=config.device, dtype=config.dtype,
                                             max_batch_size=config.batch_size, max_seq_len=config.max_seq_len,
                                             decode_loop=args.decode_loop, steps_per_sync=args.steps_per_sync,
                                             compile=args.compile)
    loop = getattr(engine, "decode_loop", None)  # as the torch engine resolved "auto"
    if loop is not None:
        config.extra["decode_loop"] = loop
    if args.compile:
        config.extra["compile"] = True
    if loop == "device":
        config.extra["steps_per_sync"] = args.steps_per_sync
    try:
        report = run_bench(config, engine=engine, progress=not getattr(args, "no_progress", False))
    finally:
        if hasattr(engine, "shutdown"):
            engine.shutdown()
    print(format_table(report))
    files = report.get("files", {})
    print(f"report: {files.get('report')}")
    print(f"plots:  {files.get('acceptance_plot')}  {files.get('tau_histogram_plot')}")
    if not report["overall"]["all_match_ar"]:
        bad = {name: d["num_prompts"] - d["num_match_ar"] for name, d in report["datasets"].items() if not d["all_match_ar"]}
        print(f"warning: DFlash output differs from AR for {bad} prompt(s); see 'mismatches' in the report")
    if report["overall"].get("hf_all_match_ar") is False:
        o = report["overall"]
        print(f"note: transformers' greedy tokens differ from our AR tokens for {o['num_prompts'] - o['hf_num_match_ar']} "
              "of the prompts (kernel numerics can flip near-tied argmaxes, more often in bf16/fp16); see "
              "'hf_mismatches' in the report")
    return 0
