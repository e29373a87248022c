"""`dflash-trt serve`: write (or reuse) the Triton model repository and run tritonserver on it until interrupted."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from dflash_trt.errors import ConfigError

TEMP_REPOSITORY_PREFIX = "dflash-triton-"


def add_serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve DFlash with Triton Inference Server (in-flight batching, streaming)")
    src = p.add_argument_group("what to serve (either --engine-dir or --target/--drafter)")
    src.add_argument("--engine-dir", help="engine directory from `dflash-trt build` (its manifest.json names the rest)")
    src.add_argument("--target", help="target checkpoint directory (Hugging Face format)")
    src.add_argument("--drafter", help="DFlash drafter directory (z-lab format)")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=0, help="Prometheus metrics port (0 = metrics off)")
    p.add_argument("--host", default="0.0.0.0", help="address the HTTP and gRPC endpoints bind to")
    p.add_argument("--model-repository", help="where to write the model repository (default: a temporary directory; "
                                              "with --engine-dir: the one the build wrote, rewritten if missing)")
    p.add_argument("--max-batch-size", type=int, default=None, help="requests decoded together (default 8, or the manifest's)")
    p.add_argument("--max-seq-len", type=int, default=None, help="prompt + new tokens per request (default: the manifest's, else 2048 or the "
                                                                        "target's max_position_embeddings if smaller)")
    p.add_argument("--verify-len", type=int, default=None,
                   help="K, block slots the target verifies per step (default: the manifest's, else the drafter's block)")
    p.add_argument("--block-size", type=int, default=None, help=argparse.SUPPRESS)  # deprecated alias of --verify-len
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N or auto (default auto, or the manifest's)")
    p.add_argument("--dtype", default=None, help="auto, float32, bfloat16 or float16 (default auto, or the manifest's)")
    p.add_argument("--no-draft", action="store_true", help="serve plain autoregressive decoding (same engine)")
    p.add_argument("--decode-loop", choices=["host", "device"], default=None,
                   help="host: one host read per step (default); device: --steps-per-sync steps per host read (CUDA "
                        "graphs + plugin kernels on a GPU)")
    p.add_argument("--steps-per-sync", type=int, default=None, help="steps per host read with --decode-loop device")
    p.add_argument("--torch-threads", type=int, default=0,
                   help="torch intra-op threads in the model process (0 = torch's default; 1 is best on a busy CPU)")
    p.add_argument("--instance-count", type=int, default=1, help="model instances (each loads its own engine)")
    p.add_argument("--log-file", help="write tritonserver's log here instead of the terminal")
    p.add_argument("--startup-timeout", type=float, default=600.0, help="seconds to wait for the model to load")
    p.set_defaults(func=serve)


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


def serve(args) -> int:
    from dflash_trt.serve.triton.repository import MODEL_NAME, write_model_repository
    from dflash_trt.serve.triton.server import TritonServer, find_tritonserver

    for name in ("http_port", "grpc_port"):
        _port(name.replace("_", "-"), getattr(args, name))
    _port("metrics-port", args.metrics_port, allow_zero=True)
    ports = [args.http_port, args.grpc_port] + ([args.metrics_port] if args.metrics_port else [])
    if len(set(ports)) != len(ports):
        raise ConfigError("--http-port, --grpc-port and --metrics-port must differ")
    if args.torch_threads < 0:
        raise ConfigError(f"--torch-threads must be >= 0 (0 = torch's default), got {args.torch_threads}")
    from dflash_trt.engines.requests import verify_len_from
    from dflash_trt.manifest import runtime_verify_len

    verify_len = verify_len_from(args.verify_len, args.block_size, "--verify-len")
    runtime: dict = {}
    manifest = None
    repository = Path(args.model_repository) if args.model_repository else None
    if args.engine_dir:
        if args.target or args.drafter:
            raise ConfigError("give either --engine-dir or --target/--drafter, not both (the engine directory names its own)")
        manifest = read_manifest(args.engine_dir)
        if manifest.get("backend") == "trtllm":
            return serve_trtllm(args, manifest)
        target, drafter = manifest["_target"], manifest["_drafter"]
        runtime = manifest.get("runtime") or {}
        if repository is None and manifest["_repository"]:
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
    # The engine validates the pair before Triton starts: a mismatched pair is one line here, not a server log.
    from dflash_trt import checkpoint as ckpt

    target_cfg = ckpt.load_target_config(target)
    if drafter and not args.no_draft:
        ckpt.check_pair(target_cfg, ckpt.load_drafter_config(drafter), drafter)

    def pick(arg, key, default):
        return arg if arg is not None else runtime.get(key, default)

    options = dict(target=target, drafter=None if args.no_draft else drafter,
                   max_batch_size=int(pick(args.max_batch_size, "max_batch_size", 8)),
                   max_seq_len=pick(args.max_seq_len, "max_seq_len", None),
                   device=str(pick(args.device, "device", "auto")), dtype=str(pick(args.dtype, "dtype", "auto")),
                   verify_len=verify_len if verify_len is not None else runtime_verify_len(manifest or {}),
                   instance_count=args.instance_count,
                   speculative=not args.no_draft, torch_num_threads=args.torch_threads,
                   decode_loop=args.decode_loop or "host", steps_per_sync=args.steps_per_sync or 4)
    tmp = None
    if repository is None:  # named with our pid: a later serve removes it if this one is killed before cleaning up
        from dflash_trt.tempdirs import make_tempdir

        tmp = make_tempdir(tempfile.gettempdir(), TEMP_REPOSITORY_PREFIX)
        repository = tmp / "model_repository"
    # An engine dir's repository is reused as the build wrote it unless an option overrides it or it is missing.
    overrides = any(v is not None for v in (args.max_batch_size, args.max_seq_len, verify_len, args.device,
                                            args.dtype, args.decode_loop, args.steps_per_sync)) or args.no_draft \
        or args.torch_threads > 0
    if not (args.engine_dir and (repository / MODEL_NAME / "config.pbtxt").is_file() and not overrides):
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
