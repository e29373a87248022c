"""`dflash-trt build --config FILE [--set key=value ...] [--output DIR] [--force]`.

Exit status: 0 built; 1 the acceptance gate failed (nothing written); 2 bad input (config, checkpoints, machine).
"""

from __future__ import annotations

import json
import sys


def add_build_parser(sub) -> None:
    p = sub.add_parser("build", help="validate target + drafter, quantize the drafter (ModelOpt), gate acceptance, "
                                     "write an engine directory",
                       description="Build an engine directory from a build config (build_configs/*.yaml): validate "
                                   "the target/drafter pair, optionally quantize the drafter to FP8/NVFP4 with ModelOpt "
                                   "and check its acceptance did not drop, then write the drafter, TensorRT-LLM options "
                                   "or the Triton model repository, and manifest.json. Written atomically.",
                       epilog="exit status: 0 built; 1 the acceptance gate failed (nothing was written); 2 bad input")
    p.add_argument("--config", required=True, help="build config YAML (see build_configs/README.md)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a config field by dotted name, e.g. --set quantization.format=nvfp4 (repeatable)")
    p.add_argument("--output", help="engine directory to write (overrides the config's 'output')")
    p.add_argument("--force", action="store_true", help="replace an existing output directory (only on success)")
    p.add_argument("--check", action="store_true", help="validate the config against the checkpoints and this "
                                                        "machine, print the plan, write nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the manifest (or the plan with --check) as JSON")
    p.set_defaults(func=run_build)


def run_build(args) -> int:
    from dflash_trt.build.config import load_build_config
    from dflash_trt.build.gate import GateError
    from dflash_trt.build.plan import describe, make_plan

    config = load_build_config(args.config, args.overrides, args.output)
    plan = make_plan(config, force=args.force or args.check)
    if args.check:
        print(json.dumps(config.to_yaml_dict(), indent=2) if args.json else f"ok: {describe(plan)}")
        return 0
    from dflash_trt.build.builder import build

    try:
        manifest = build(plan, progress=not args.no_progress)
    except GateError as err:
        print(f"dflash-trt build: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(manifest, indent=2))
        return 0
    acc = manifest.get("acceptance")
    print(f"engine directory: {plan.output}")
    print(f"backend {manifest['backend']}, drafter {manifest['drafter']['quantization']}, "
          f"verify K={manifest['runtime']['verify_len']}")
    if acc:
        print(f"mean tau: unquantized {acc['tau_unquantized']:.3f} -> {manifest['drafter']['quantization']} "
              f"{acc['tau_quantized']:.3f} (drop {100 * acc['relative_tau_drop']:.2f}%, gate "
              f"{100 * acc['max_tau_drop']:.2f}%: passed)")
    if manifest["backend"] == "trtllm":
        print(f"serve: trtllm-serve {manifest['target']['path']} --extra_llm_api_options "
              f"{plan.output / manifest['trtllm']['llm_api_options']}")
    else:
        print(f"run:   dflash-trt generate --engine-dir {plan.output} --prompt '...'\n"
              f"serve: dflash-trt serve --engine-dir {plan.output}")
    return 0
