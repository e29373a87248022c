"""`dflash-trt serve`: serve DFlash until interrupted.

`--api triton` (the default): write (or reuse) the Triton model repository and run tritonserver on it.
`--api openai`: an OpenAI-compatible HTTP server (FastAPI + uvicorn) over the torch engine in this process
(`dflash_trt/serve/openai/`). Both read their options, and an engine directory's manifest, through `resolve_serve`;
a backend-trtllm engine directory is served by TensorRT-LLM's own (OpenAI-compatible) trtllm-serve with either API.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dflash_trt.capabilities import DECODE_LOOPS
from dflash_trt.errors import ConfigError

TEMP_REPOSITORY_PREFIX = "dflash-triton-"


def add_serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve DFlash: Triton Inference Server (default) or an OpenAI-compatible HTTP API")
    p.add_argument("--api", choices=["triton", "openai"], default="triton",
                   help="triton: tritonserver with the `dflash` model (HTTP + gRPC); openai: /v1/completions, "
                        "/v1/chat/completions, /v1/models, /health, /metrics over HTTP (pip install -e .[serve])")
    src = p.add_argument_group("what to serve (either --engine-dir or --target/--drafter)")
    src.add_argument("--engine-dir", help="engine directory from `dflash-trt build` (its manifest.json names the rest)")
    src.add_argument("--target", help="target checkpoint directory (Hugging Face format)")
    src.add_argument("--drafter", help="DFlash drafter directory (z-lab format)")
    p.add_argument("--http-port", "--port", dest="http_port", type=int, default=8000,
                   help="HTTP port (Triton's HTTP endpoint, or the OpenAI API)")
    p.add_argument("--host", default="0.0.0.0", help="address the endpoints bind to (127.0.0.1: this machine only)")
    p.add_argument("--max-batch-size", type=int, default=None, help="requests decoded together (default 8, or the manifest's)")
    p.add_argument("--max-seq-len", type=int, default=None, help="prompt + new tokens per request (default: the manifest's, else 2048 or the "
                                                                        "target's max_position_embeddings if smaller)")
    p.add_argument("--verify-len", type=int, default=None,
                   help="K, block slots the target verifies per step (default: the manifest's, else the drafter's block)")
    p.add_argument("--block-size", type=int, default=None, help=argparse.SUPPRESS)  # deprecated alias of --verify-len
    p.add_argument("--draft", default=None, metavar="chain:K|tree:N|auto",
                   help="draft budget: chain:K (= --verify-len K), tree:N (a draft tree of N nodes) or auto (K chosen "
                        "per window from measured acceptance and step cost)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N or auto (default auto, or the manifest's)")
    p.add_argument("--dtype", default=None, help="auto, float32, bfloat16 or float16 (default auto, or the manifest's)")
    p.add_argument("--no-draft", action="store_true", help="serve plain autoregressive decoding (same engine)")
    p.add_argument("--decode-loop", choices=DECODE_LOOPS, default=None,
                   help="auto (default): device where CUDA graphs run (a GPU with the plugin kernels), else host; "
                        "host: one host read per step; device: --steps-per-sync steps per host read (CUDA graphs + "
                        "plugin kernels on a GPU)")
    p.add_argument("--steps-per-sync", type=int, default=None, help="steps per host read with --decode-loop device")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the torch engine's decode step (see `dflash-trt generate --help`): the first "
                        "requests of each kind compile (seconds), later ones run faster")
    p.add_argument("--torch-threads", type=int, default=0,
                   help="torch intra-op threads in the model process (0 = torch's default; 1 is best on a busy CPU)")
    oa = p.add_argument_group("--api openai only")
    oa.add_argument("--served-model-name", default=None,
                    help="the model name requests must give (default: the target directory's name)")
    tr = p.add_argument_group("--api triton only")
    tr.add_argument("--grpc-port", type=int, default=None, help="gRPC port (default 8001)")
    tr.add_argument("--metrics-port", type=int, default=None, help="Prometheus metrics port (default 0 = metrics off)")
    tr.add_argument("--model-repository", help="where to write the model repository (default: a temporary directory; "
                                               "with --engine-dir: the one the build wrote, rewritten if missing)")
    tr.add_argument("--instance-count", type=int, default=None,
                    help="model instances (default 1; each loads its own engine)")
    tr.add_argument("--log-file", help="write tritonserver's log here instead of the terminal")
    tr.add_argument("--startup-timeout", type=float, default=None,
                    help="seconds to wait for the model to load (default 600)")
    p.set_defaults(func=serve)


TRITON_ONLY = ("grpc_port", "metrics_port", "model_repository", "instance_count", "log_file", "startup_timeout")
TRITON_DEFAULTS = {"grpc_port": 8001, "metrics_port": 0, "instance_count": 1, "startup_timeout": 600.0}


def _port(name: str, value: int, allow_zero: bool = False) -> None:
    if not (0 if allow_zero else 1) <= value <= 65535:
        raise ConfigError(f"--{name} must be a port number in 1..65535, got {value}")


def read_manifest(engine_dir: str | os.PathLike) -> dict:
    """manifest.json of an engine directory (docs/engine-dir.md), with target/drafter/repository paths made absolute."""
    from dflash_trt.manifest import load_manifest, manifest_path, verify_files

    manifest = load_manifest(engine_dir)
    verify_files(manifest, engine_dir)
    manifest["_target"] = str(manifest_path(manifest, engine_dir, "target").resolve())
    manifest["_drafter"] = str(manifest_path(manifest, engine_dir, "drafter").resolve())
    repo = manifest_path(manifest, engine_dir, "triton", "model_repository", required=False)
    manifest["_repository"] = str(repo.resolve()) if repo is not None else None
    return manifest


def trtllm_serve_command(engine_dir: str | os.PathLike, manifest: dict, host: str, port: int,
                         executable: str = "trtllm-serve") -> list[str]:
    """TensorRT-LLM's own server for a backend-trtllm engine directory: `trtllm-serve TARGET --host H --port P
    --extra_llm_api_options ENGINE_DIR/trtllm/llm_api_options.yaml` (the options carry the DFlash speculative_config,
    parallelism, CUDA graphs and KV cache settings; trtllm-serve merges them over its own defaults)."""
    from dflash_trt.manifest import manifest_path

    options = manifest_path(manifest, engine_dir, "trtllm", "llm_api_options")
    if not options.is_file():
        raise ConfigError(f"{options}: named by manifest.json trtllm.llm_api_options but missing; rebuild the engine "
                          "directory")
    return [executable, manifest["_target"], "--host", host, "--port", str(port),
            "--extra_llm_api_options", str(options.resolve())]


def serve_trtllm(args, manifest: dict) -> int:
    """A backend-trtllm engine directory is served by TensorRT-LLM itself (OpenAI-compatible HTTP on --http-port:
    /v1/completions, /v1/chat/completions, /health, /metrics); dflash-trt runs it and stops it on Ctrl-C."""
    import subprocess

    executable = shutil.which("trtllm-serve")
    if executable is None:
        cmd = " ".join(trtllm_serve_command(args.engine_dir, manifest, args.host, args.http_port))
        raise ConfigError(f"--engine-dir {args.engine_dir} has backend trtllm, served by TensorRT-LLM's trtllm-serve, "
                          f"which is not installed here (run in the dflash-trt Docker image, or pip install "
                          f"tensorrt_llm on a GPU host); the command would be: {cmd}")
    cmd = trtllm_serve_command(args.engine_dir, manifest, args.host, args.http_port, executable)
    print(f"dflash-trt serve: {' '.join(cmd)}", file=sys.stderr, flush=True)
    from dflash_trt.serve.child import die_with_parent

    proc = subprocess.Popen(cmd, preexec_fn=die_with_parent())

    def on_signal(signum, frame):  # SIGINT / SIGTERM (docker stop): stop trtllm-serve cleanly, then exit
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
            return 0
        except subprocess.TimeoutExpired:
            proc.kill()
            return 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass
class ServeSpec:
    """What `serve` serves, from the command line and an engine directory's manifest (one reading for both APIs)."""

    backend: str  # "torch", or "trtllm" (an engine directory served by trtllm-serve; only `manifest` is set)
    manifest: dict | None = None
    target: str | None = None
    drafter: str | None = None  # None with --no-draft
    max_batch_size: int = 8
    max_seq_len: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    verify_len: int | None = None
    draft: str | None = None  # "chain:K" / "auto" (None: verify_len)
    speculative: bool = True
    torch_threads: int = 0
    decode_loop: str = "auto"
    steps_per_sync: int = 4
    compile: bool = False  # torch.compile the decode step
    draft_prior: list[float] | None = None  # the "auto" budget's prior: the engine directory's measured curve
    repository: Path | None = None  # the engine directory's Triton model repository, if it names one
    overrides: bool = False  # an option on the command line overrides a runtime value of the manifest


def resolve_serve(args) -> ServeSpec:
    """The engine settings from args (and --engine-dir's manifest.json: paths, runtime values; options override them).
    Checks the paths and the target/drafter pair from their configs (one line, before any weight is read)."""
    if args.torch_threads < 0:
        raise ConfigError(f"--torch-threads must be >= 0 (0 = torch's default), got {args.torch_threads}")
    from dflash_trt.engines.requests import verify_len_from
    from dflash_trt.manifest import draft_prior, runtime_budget

    verify_len = verify_len_from(args.verify_len, args.block_size, "--verify-len")
    runtime: dict = {}
    manifest = None
    repository = None
    if args.engine_dir:
        if args.target or args.drafter:
            raise ConfigError("give either --engine-dir or --target/--drafter, not both (the engine directory names its own)")
        manifest = read_manifest(args.engine_dir)
        if manifest.get("backend") == "trtllm":
            if args.compile:
                raise ConfigError("--compile is for the torch engine; a trtllm engine directory is served by "
                                  "trtllm-serve, which compiles through TensorRT-LLM's torch_compile_config")
            return ServeSpec(backend="trtllm", manifest=manifest)
        target, drafter = manifest["_target"], manifest["_drafter"]
        runtime = manifest.get("runtime") or {}
        if manifest["_repository"]:
            repository = Path(manifest["_repository"])
    else:
        if not args.target:
            raise ConfigError("--target (or --engine-dir) is required")
        if not args.drafter and not args.no_draft:
            raise ConfigError("--drafter is required unless --no-draft is given")
        target, drafter = args.target, args.drafter
    for label, path in (("target", target), ("drafter", drafter)):
        if path and not Path(path).is_dir():
            raise ConfigError(f"{label} directory {path} does not exist")
    # The pair is validated before any server starts: a mismatched pair is one line here, not a server log.
    from dflash_trt import checkpoint as ckpt

    target_cfg = ckpt.load_target_config(target)
    if drafter and not args.no_draft:
        ckpt.check_pair(target_cfg, ckpt.load_drafter_config(drafter), drafter)

    def pick(arg, key, default):
        return arg if arg is not None else runtime.get(key, default)

    overrides = any(v is not None for v in (args.max_batch_size, args.max_seq_len, verify_len, args.draft, args.device,
                                            args.dtype, args.decode_loop, args.steps_per_sync)) or args.no_draft \
        or args.torch_threads > 0 or args.compile
    budget_verify_len, draft = runtime_budget(manifest or {}, verify_len, args.draft)
    return ServeSpec(backend="torch", manifest=manifest, target=target, drafter=None if args.no_draft else drafter,
                     max_batch_size=int(pick(args.max_batch_size, "max_batch_size", 8)),
                     max_seq_len=pick(args.max_seq_len, "max_seq_len", None),
                     device=str(pick(args.device, "device", "auto")), dtype=str(pick(args.dtype, "dtype", "auto")),
                     verify_len=budget_verify_len, draft=draft,
                     speculative=not args.no_draft, torch_threads=args.torch_threads,
                     decode_loop=args.decode_loop or "auto", steps_per_sync=args.steps_per_sync or 4, compile=args.compile,
                     repository=repository, overrides=overrides,
                     draft_prior=draft_prior(manifest, args.engine_dir) if manifest and not args.no_draft else None)


def serve(args) -> int:
    if args.api == "openai":
        return serve_openai_api(args)
    if args.served_model_name is not None:
        raise ConfigError("--served-model-name is for --api openai (the Triton model is named 'dflash')")
    return serve_triton(args)


def serve_openai_api(args) -> int:
    given = [name for name in TRITON_ONLY if getattr(args, name) is not None]
    if given:
        raise ConfigError(f"--{given[0].replace('_', '-')} is a Triton option; --api openai serves HTTP on --port only "
                          "(drop it, or use --api triton)")
    _port("port", args.http_port, allow_zero=True)
    spec = resolve_serve(args)
    if spec.backend == "trtllm":
        if args.served_model_name is not None:
            raise ConfigError("--served-model-name is not passed to trtllm-serve (a backend-trtllm engine directory); "
                              "drop it: trtllm-serve names the model after the target")
        return serve_trtllm(args, spec.manifest)
    from dflash_trt.serve.openai.server import serve_openai

    return serve_openai(spec, host=args.host, port=args.http_port, served_model_name=args.served_model_name)


def serve_triton(args) -> int:
    from dflash_trt.serve.triton.repository import MODEL_NAME, write_model_repository
    from dflash_trt.serve.triton.server import TritonServer, find_tritonserver

    for name, default in TRITON_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    for name in ("http_port", "grpc_port"):
        _port(name.replace("_", "-"), getattr(args, name))
    _port("metrics-port", args.metrics_port, allow_zero=True)
    ports = [args.http_port, args.grpc_port] + ([args.metrics_port] if args.metrics_port else [])
    if len(set(ports)) != len(ports):
        raise ConfigError("--http-port, --grpc-port and --metrics-port must differ")
    spec = resolve_serve(args)
    if spec.backend == "trtllm":
        return serve_trtllm(args, spec.manifest)
    repository = Path(args.model_repository) if args.model_repository else spec.repository
    options = dict(target=spec.target, drafter=spec.drafter, max_batch_size=spec.max_batch_size,
                   max_seq_len=spec.max_seq_len, device=spec.device, dtype=spec.dtype, verify_len=spec.verify_len,
                   draft=spec.draft, instance_count=args.instance_count, speculative=spec.speculative,
                   torch_num_threads=spec.torch_threads, decode_loop=spec.decode_loop,
                   steps_per_sync=spec.steps_per_sync, compile=spec.compile, draft_prior=spec.draft_prior)
    tmp = None
    if repository is None:  # named with our pid: a later serve removes it if this one is killed before cleaning up
        from dflash_trt.tempdirs import make_tempdir

        tmp = make_tempdir(tempfile.gettempdir(), TEMP_REPOSITORY_PREFIX)
        repository = tmp / "model_repository"
    # An engine dir's repository is reused as the build wrote it unless an option overrides it or it is missing.
    if not (args.engine_dir and (repository / MODEL_NAME / "config.pbtxt").is_file() and not spec.overrides):
        write_model_repository(repository, **options)
    install = find_tritonserver()
    server = TritonServer(repository, http_port=args.http_port, grpc_port=args.grpc_port,
                          metrics_port=args.metrics_port or None, host=args.host, log_path=args.log_file,
                          install=install)

    def on_signal(signum, frame):  # SIGINT / SIGTERM: stop the server cleanly, then exit
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"dflash-trt serve: repository {repository}; starting {install.binary}", file=sys.stderr, flush=True)
        server.start(timeout=args.startup_timeout)
        print(f"dflash-trt serve: ready - HTTP {server.http_url}, gRPC {server.grpc_url}, model '{MODEL_NAME}' "
              "(Ctrl-C to stop)", file=sys.stderr, flush=True)
        code = server.process.wait()
        print(f"dflash-trt serve: tritonserver exited with code {code}", file=sys.stderr)
        return 0 if code == 0 else 1
    except KeyboardInterrupt:
        print("dflash-trt serve: stopping tritonserver", file=sys.stderr, flush=True)
        code = server.stop()
        print(f"dflash-trt serve: stopped (exit code {code})", file=sys.stderr, flush=True)
        return 0
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
