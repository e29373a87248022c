"""`dflash-trt serve --api openai`: load the torch engine, then serve the OpenAI API with uvicorn until interrupted."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

from dflash_trt.errors import ConfigError
from dflash_trt.serve.openai import require_server_deps


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound socket for (host, port): a port in use or an address that is not ours is a ConfigError now, before the
    model loads, instead of a uvicorn log line after it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise ConfigError(f"--host {host!r} is not an address this machine can listen on ({err.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror}; pick another --port (or stop what uses "
                          "it)") from None
    sock.set_inheritable(True)
    return sock


def serve_openai(spec, *, host: str, port: int, served_model_name: str | None = None) -> int:
    """Serve `spec` (serve/cli.py's ServeSpec, backend torch) on host:port until SIGINT / SIGTERM."""
    require_server_deps()
    if served_model_name is not None and not served_model_name.strip():
        raise ConfigError("--served-model-name is empty; give a name or omit it (default: the target directory's name)")
    sock = listen_socket(host, port)
    try:
        import torch
        import uvicorn

        from dflash_trt.engines.torch_engine import TorchEngine
        from dflash_trt.serve.openai.app import make_app

        if spec.torch_threads > 0:
            torch.set_num_threads(spec.torch_threads)
        engine = TorchEngine.from_pretrained(
            spec.target, spec.drafter, device=None if spec.device == "auto" else spec.device,
            dtype=None if spec.dtype == "auto" else spec.dtype, max_batch_size=spec.max_batch_size,
            max_seq_len=spec.max_seq_len, decode_loop=spec.decode_loop, steps_per_sync=spec.steps_per_sync,
            compile=spec.compile, draft_prior=spec.draft_prior)
        name = served_model_name or Path(spec.target).resolve().name
        app = make_app(engine, model_name=name, verify_len=spec.verify_len, use_drafter=spec.speculative,
                       draft=spec.draft if spec.speculative else None)
        bound = sock.getsockname()
        print(f"dflash-trt serve: OpenAI API on http://{host}:{bound[1]}/v1 - model '{name}', "
              f"{'DFlash, draft ' + app.state.runner.scheduler.budget.describe() if app.state.runner.k > 1 else 'autoregressive'}, "
              f"device {engine.device}, max_batch_size {engine.max_batch_size}, max_seq_len {engine.max_seq_len} "
              "(Ctrl-C to stop)", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="info", timeout_graceful_shutdown=5, lifespan="on")
        server = uvicorn.Server(config)

        def on_signal(signum, frame):  # uvicorn re-raises the SIGINT / SIGTERM it shut down for: a clean exit here
            raise KeyboardInterrupt

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            server.run(sockets=[sock])  # SIGINT / SIGTERM (docker stop): graceful shutdown, engine thread stopped
        except KeyboardInterrupt:
            pass
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    finally:
        sock.close()
    print("dflash-trt serve: stopped", file=sys.stderr, flush=True)
    return 0
