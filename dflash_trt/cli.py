"""`dflash-trt` command line. Bad input ends in one line naming the field and the fix (exit 2), never a traceback."""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from dflash_trt.capabilities import DECODE_LOOPS
from dflash_trt.errors import ConfigError, DeprecatedOption, DFlashError


def _add_generate(sub):
    p = sub.add_parser("generate", help="generate text with DFlash speculative decoding (or plain AR)")
    p.add_argument("--engine-dir", help="engine directory from `dflash-trt build` (instead of --target/--drafter)")
    p.add_argument("--target", help="target checkpoint directory (Hugging Face format)")
    p.add_argument("--drafter", help="DFlash drafter directory (z-lab format); omit with --no-draft")
    p.add_argument("--prompt", action="append", required=True, help="prompt text; repeat for a batch")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--verify-len", type=int, default=None,
                   help="K, block slots the target verifies per step, 2..the drafter's block_size (default: all of them)")
    p.add_argument("--block-size", type=int, default=None, help=argparse.SUPPRESS)  # deprecated alias of --verify-len
    p.add_argument("--draft", default=None, metavar="chain:K|tree:N|auto", help="chain:K (verify K block slots per step, = --verify-len K), tree:N (verify a draft tree of N nodes from the drafter's top candidates; spec/tree.py) or auto (K chosen per window from measured acceptance and step cost; spec/budget.py)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    p.add_argument("--dtype", default="auto", help="auto (the checkpoint's own), float32, bfloat16 or float16")
    p.add_argument("--max-seq-len", type=int, default=None,
                   help="prompt + new tokens per request (default 2048, or the target's max_position_embeddings if smaller)")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--no-draft", action="store_true", help="plain autoregressive decoding with the same engine")
    p.add_argument("--decode-loop", choices=DECODE_LOOPS, default="auto",
                   help="auto (default): device where CUDA graphs run (a GPU with the plugin kernels), else host; "
                        "host: one host read per step; device: --steps-per-sync steps on the device per host read "
                        "(CUDA graphs + plugin kernels on a GPU)")
    p.add_argument("--steps-per-sync", type=int, default=4, help="steps per host read with --decode-loop device")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the decode step (Inductor; native Qwen3 / Llama targets): each step "
                        "variant compiles on first use (seconds; cached on disk across runs), then runs faster, most "
                        "where many small ops bound the step (CPU, small models)")
    p.add_argument("--check-ar", action="store_true", help="also run AR and report whether the outputs are identical")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=_generate)


def _generate(args) -> int:
    from dflash_trt.engines.torch_engine import TorchEngine
    from dflash_trt.spec.sampling import SamplingParams

    if args.engine_dir and (args.target or args.drafter):
        raise ConfigError("give either --engine-dir or --target/--drafter, not both (the engine directory names its own)")
    if not args.engine_dir and not args.target:
        raise ConfigError("--target (or --engine-dir) is required")
    if not args.engine_dir and not args.no_draft and not args.drafter:
        raise ConfigError("--drafter is required unless --no-draft is given")
    from dflash_trt.engines.requests import verify_len_from
    from dflash_trt.manifest import runtime_budget

    verify_len = verify_len_from(args.verify_len, args.block_size, "--verify-len")
    # Request errors first: a typo in --temperature must not cost a full model load.
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                            top_p=args.top_p, seed=args.seed, ignore_eos=args.ignore_eos).validate()
    if args.engine_dir:
        from dflash_trt.build.engine_dir import open_engine

        engine, manifest = open_engine(args.engine_dir, device=args.device,
                                       dtype=None if args.dtype == "auto" else args.dtype,
                                       max_batch_size=len(args.prompt), use_drafter=not args.no_draft,
                                       decode_loop=args.decode_loop, steps_per_sync=args.steps_per_sync,
                                       compile=args.compile)
        if manifest["backend"] == "torch":
            verify_len, args.draft = runtime_budget(manifest, verify_len, args.draft)
    else:
        engine = TorchEngine.from_pretrained(args.target, None if args.no_draft else args.drafter, device=args.device,
                                             dtype=args.dtype, max_batch_size=len(args.prompt),
                                             max_seq_len=args.max_seq_len, decode_loop=args.decode_loop,
                                             steps_per_sync=args.steps_per_sync, compile=args.compile)
    if args.draft is not None and (args.no_draft or getattr(engine, "draft_budget", None) is None):
        raise ConfigError("--draft needs the torch engine with a drafter (not --no-draft, not a TensorRT-LLM engine)")
    results = engine.generate(args.prompt, params, verify_len=None if args.no_draft else verify_len,
                              **({"draft": args.draft} if args.draft is not None else {}))
    from dflash_trt.spec.stats import Stats

    merged = Stats.merge([r.stats for r in results])
    merged.prefill_s, merged.decode_s = results[0].stats.prefill_s, results[0].stats.decode_s  # one batch
    report = {"mode": "ar" if args.no_draft else "dflash", "results": [
        {"prompt": prompt, "text": r.text, "token_ids": r.token_ids, "finish_reason": r.finish_reason,
         "stats": r.stats.to_dict()} for prompt, r in zip(args.prompt, results)], "stats": merged.to_dict()}
    if args.check_ar and not args.no_draft:
        ar = engine.generate(args.prompt, params, use_drafter=False)
        report["matches_ar"] = [a.token_ids == r.token_ids for a, r in zip(ar, results)]
    failed = [(i, r.error) for i, r in enumerate(results) if r.finish_reason == "error"]
    for i, error in failed:
        print(f"dflash-trt generate: prompt {i} failed: {error}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
        return 1 if failed else 0
    for item in report["results"]:
        print(f"--- prompt: {item['prompt']!r}")
        print(item["text"])
        print(f"[finish={item['finish_reason']} tokens={len(item['token_ids'])} mean_tau={item['stats']['mean_tau']:.2f}]")
    print(f"--- {report['mode']}: {merged.summary()}")
    if args.compile:
        print("--- note: --compile compiled the step during this run, so its decode time includes compiling; the "
              "speed shows over many requests (serve, bench)")
    if "matches_ar" in report:
        print(f"--- identical to AR: {all(report['matches_ar'])} {report['matches_ar']}")
    return 1 if failed else 0


def _add_make_tiny_pair(sub):
    p = sub.add_parser("make-tiny-pair", help="write a tiny random target + DFlash drafter (+ tokenizer) for demos and tests")
    p.add_argument("--output", required=True, help="directory to create (gets target/ and drafter/)")
    p.add_argument("--family", default="qwen3", choices=["qwen3", "llama", "gpt_oss"],
                   help="gpt_oss: a transformers GptOss target (sliding/full attention, sinks, MoE) run by the "
                        "transformers-backed target")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.set_defaults(func=_make_tiny_pair)


def _make_tiny_pair(args) -> int:
    from dflash_trt.tiny import make_tiny_pair

    target, drafter = make_tiny_pair(args.output, family=args.family, seed=args.seed, block_size=args.block_size,
                                     dtype=args.dtype)
    print(f"target:  {target}\ndrafter: {drafter}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dflash-trt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub)
    _add_make_tiny_pair(sub)
    from dflash_trt.bench.cli import add_bench_parser
    from dflash_trt.doctor import add_doctor_parser
    from dflash_trt.train.trainer import add_train_parser

    add_train_parser(sub)
    add_bench_parser(sub)
    from dflash_trt.serve.cli import add_serve_parser

    add_serve_parser(sub)
    add_doctor_parser(sub)
    from dflash_trt.build.cli import add_build_parser

    add_build_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def one_line(message, category, *_args, **_kwargs):  # a deprecated option: one line, not a source excerpt
        print(f"dflash-trt {args.command}: warning: {message}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", DeprecatedOption)
            warnings.showwarning = one_line
            return args.func(args)
    except DFlashError as err:
        print(f"dflash-trt {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
