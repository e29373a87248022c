"""Find and run `tritonserver`: the one on PATH, or the one bundled in the nvidia-pytriton wheel.

The wheel ships `pytriton/tritonserver/bin/tritonserver`, the Python backend (`backends/python/libtriton_python.so`)
and one backend stub per Python version (`python_backend_stubs/3.X/triton_python_backend_stub`), with its shared
libraries in `nvidia_pytriton.libs/`. The backend looks for the stub next to libtriton_python.so, so we assemble a
backend directory (`<cache>/python/`: the .so, the utils module and the stub for this interpreter) and pass it as
--backend-directory; the stub links libpython3.X, so this interpreter's LIBDIR goes first on LD_LIBRARY_PATH (the
stub then runs *this* Python, with its site-packages).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from dflash_trt.errors import ConfigError
from dflash_trt.serve.child import die_with_parent


@dataclass
class TritonInstall:
    binary: Path
    backend_dir: Path | None = None  # --backend-directory (None: the server's default)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the server


def _pytriton_root() -> Path | None:
    spec = importlib.util.find_spec("pytriton")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / "tritonserver"
    return root if (root / "bin" / "tritonserver").is_file() else None


def _lib_path(*dirs: Path | str) -> str:
    parts = [str(d) for d in dirs if d] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    return ":".join(dict.fromkeys(parts))


def locate_tritonserver() -> dict[str, str | None]:
    """Where tritonserver and its Python backend are, without preparing anything (what `doctor` reports):
    {"server", "python_backend", "source"}: the `tritonserver` on PATH or in $TRITON_SERVER_ROOT/bin (a Triton
    container: its own backends), else the nvidia-pytriton wheel's; server None if there is none."""
    triton_root = Path(os.environ.get("TRITON_SERVER_ROOT", "/opt/tritonserver"))
    installed = shutil.which("tritonserver") or (str(triton_root / "bin" / "tritonserver")
                                                 if (triton_root / "bin" / "tritonserver").is_file() else None)
    if installed:
        backend = triton_root / "backends" / "python"
        return {"server": installed, "python_backend": str(backend) if backend.is_dir() else None,
                "source": "installed"}
    root = _pytriton_root()
    if root is None:
        return {"server": None, "python_backend": None, "source": None}
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
    backend = root / "backends" / "python"
    return {"server": str(root / "bin" / "tritonserver"),
            "python_backend": str(backend) if backend.is_dir() and stub.is_file() else None, "source": "nvidia-pytriton"}


def find_tritonserver(cache_dir: str | os.PathLike | None = None) -> TritonInstall:
    """The `tritonserver` locate_tritonserver finds; for the nvidia-pytriton wheel's, a Python backend directory is
    assembled for this interpreter. Raises ConfigError if there is none."""
    found = locate_tritonserver()
    if found["source"] == "installed":
        return TritonInstall(Path(found["server"]))
    root = _pytriton_root()
    if root is None:
        raise ConfigError("tritonserver was not found on PATH and the nvidia-pytriton wheel is not installed; "
                          "pip install 'dflash-trt[serve]' (or run inside a Triton container)")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise ConfigError(f"the nvidia-pytriton wheel has no Python backend stub for Python {version} ({stub}); "
                          "use a Python version it ships a stub for")
    source = root / "backends" / "python"
    key = hashlib.sha256(f"{root}|{version}|{stub.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    base = Path(cache_dir) if cache_dir else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dflash-trt"
    backends = base / f"triton-backends-{key}"
    if not (backends / "python" / "triton_python_backend_stub").is_file():
        tmp = base / f".triton-backends-{key}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "python").mkdir(parents=True)
        for f in source.iterdir():
            if f.is_file():
                shutil.copy2(f, tmp / "python" / f.name)
        shutil.copy2(stub, tmp / "python" / stub.name)
        try:
            os.replace(tmp, backends)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    libs = root.parent.parent / "nvidia_pytriton.libs"
    env = {"LD_LIBRARY_PATH": _lib_path(sysconfig.get_config_var("LIBDIR"), libs)}
    # The stub embeds the `python3` it finds first on PATH (its pyvenv.cfg / prefix decides sys.path): make that this
    # interpreter (a venv's python3 included), or the numpy<2 venv made for it.
    venv = _numpy1_venv(base)
    bin_dir = venv / "bin" if venv is not None else Path(sys.executable).parent
    env["PATH"] = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])
    return TritonInstall(root / "bin" / "tritonserver", backends, env)


def _numpy_major() -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("numpy").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return 0


def _numpy1_venv(base: Path) -> Path | None:
    """The wheel's backend stub (pybind11 built against numpy 1.x) misreads numpy 2 arrays: string inputs come out
    as garbage and outputs fail size checks. `pip install dflash-trt[serve]` resolves numpy<2 (nvidia-pytriton
    requires it), and then nothing is needed. If this interpreter has numpy 2 anyway, the stub gets its own venv
    (--system-site-packages, plus numpy<2): the stub runs the `python3` first on PATH, and a pyvenv.cfg next to it
    makes that venv's site-packages (numpy 1.x) come before this interpreter's (torch, transformers, dflash_trt)."""
    if _numpy_major() < 2:
        return None
    tag = f"{sys.version_info.major}.{sys.version_info.minor}-{hashlib.sha256(sys.prefix.encode()).hexdigest()[:8]}"
    venv = base / f"stub-venv-{tag}"
    marker = venv / ".ready"
    if marker.is_file():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                       capture_output=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "numpy>=1.21,<2"], check=True,
                       capture_output=True)
    except (subprocess.CalledProcessError, OSError) as err:
        detail = getattr(err, "stderr", b"") or b""
        raise ConfigError("the Triton Python backend stub needs numpy<2 but this environment has numpy 2 and making a "
                          f"numpy<2 venv for it failed ({err}; {detail.decode(errors='replace')[-300:]}); "
                          "pip install 'numpy<2' or 'dflash-trt[serve]'") from None
    marker.write_text("ok\n")
    return venv


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class TritonServer:
    """One tritonserver process over a model repository. start() waits until the model is ready; stop() ends it
    cleanly (SIGINT, then SIGTERM, then SIGKILL, each after a grace period)."""

    def __init__(self, repository: str | os.PathLike, *, http_port: int = 0, grpc_port: int = 0,
                 metrics_port: int | None = None, host: str = "127.0.0.1", log_path: str | os.PathLike | None = None,
                 install: TritonInstall | None = None, extra_args: tuple[str, ...] = ()):
        self.repository = Path(repository)
        self.host = host
        probe = "127.0.0.1" if host in ("0.0.0.0", "", "127.0.0.1") else host
        self.http_port = http_port or free_port(probe)
        self.grpc_port = grpc_port or free_port(probe)
        self.metrics_port = metrics_port
        self.install = install or find_tritonserver()
        self.log_path = Path(log_path) if log_path else None
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}" if self.host in ("0.0.0.0", "") else f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}" if self.host in ("0.0.0.0", "") else f"{self.host}:{self.grpc_port}"

    def command(self) -> list[str]:
        cmd = [str(self.install.binary), f"--model-repository={self.repository}",
               f"--http-address={self.host}", f"--http-port={self.http_port}",
               f"--grpc-address={self.host}", f"--grpc-port={self.grpc_port}", "--log-verbose=0"]
        if self.metrics_port:
            cmd += ["--allow-metrics=true", f"--metrics-port={self.metrics_port}"]
        else:
            cmd += ["--allow-metrics=false"]
        if self.install.backend_dir is not None:
            cmd.append(f"--backend-directory={self.install.backend_dir}")
        return cmd + list(self.extra_args)

    def start(self, timeout: float = 300.0, wait: bool = True) -> "TritonServer":
        env = dict(os.environ, **self.install.env)
        out = None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")
            out = self._log
        self.process = subprocess.Popen(self.command(), env=env, stdout=out, stderr=subprocess.STDOUT if out else None,
                                        start_new_session=True, preexec_fn=die_with_parent())
        if wait:
            self.wait_ready(timeout)
        return self

    def _log_tail(self, n: int = 40) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def wait_ready(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://{self.http_url}/v2/health/ready"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ConfigError(f"tritonserver exited with code {self.process.returncode} before it was ready"
                                  + (f"; log ({self.log_path}):\n{self._log_tail()}" if self.log_path else ""))
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise ConfigError(f"tritonserver was not ready after {timeout:.0f} s" +
                          (f"; log ({self.log_path}):\n{self._log_tail()}" if self.log_path else ""))

    def stop(self, grace: float = 30.0) -> int | None:
        """SIGINT (Triton unloads the models: finalize runs), then SIGTERM, then SIGKILL. Returns the exit code."""
        p = self.process
        if p is None:
            return None
        for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            if p.poll() is not None:
                break
            try:
                os.killpg(p.pid, sig)  # its own session: the backend stubs go with it
            except ProcessLookupError:
                break
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        if self._log is not None:
            self._log.close()
            self._log = None
        return p.returncode

    def __enter__(self) -> "TritonServer":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
