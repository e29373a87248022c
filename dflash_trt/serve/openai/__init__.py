"""`dflash-trt serve --api openai`: an OpenAI-compatible HTTP server over the torch engine (docs/serve.md).

    protocol.py  request bodies (pydantic), OpenAI-style errors, the SamplingParams mapping
    text.py      stop strings and streamed text: what may be sent so far (pure functions)
    runner.py    the engine thread: one BatchScheduler, requests in through a queue, updates out per request
    metrics.py   Prometheus metrics (prometheus_client, a registry per server)
    app.py       make_app(engine, ...): the FastAPI application
    server.py    serve_openai(spec, ...): load the engine, run uvicorn

FastAPI, uvicorn and prometheus_client are the `serve` extra; they are imported only when a server is made, so the rest
of dflash-trt (and `dflash-trt --help`) works without them.
"""

from __future__ import annotations

from dflash_trt.errors import ConfigError

_MODULES = ("fastapi", "uvicorn", "prometheus_client")


def require_server_deps() -> None:
    """A ConfigError naming the fix when the OpenAI server's dependencies are not installed."""
    import importlib

    missing = []
    for module in _MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ConfigError(f"--api openai needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not "
                          "installed: pip install -e .[serve] (or pip install fastapi uvicorn prometheus_client)")
