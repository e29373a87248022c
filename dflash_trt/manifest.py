"""The engine directory's `manifest.json` (docs/engine-dir.md): read and checked in one place.

`dflash-trt build` writes it (dflash_trt/build/engine_dir.py); `generate/bench --engine-dir`, `serve --engine-dir`,
`doctor --engine-dir` and the TensorRT-LLM engine read it through `load_manifest`. Paths inside the manifest are
relative to the engine directory unless absolute (`resolve`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from dflash_trt.errors import ConfigError

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "dflash-trt-engine"
MANIFEST_VERSION = 1
MANIFEST_VERSIONS = (1,)  # versions this dflash-trt reads


def load_manifest(engine_dir: str | os.PathLike) -> dict:
    """DIR/manifest.json, checked for format and version. Bad input raises ConfigError naming the file and the fix."""
    d = Path(engine_dir)
    if not d.is_dir():
        raise ConfigError(f"--engine-dir {d}: not a directory (give the directory `dflash-trt build` wrote)")
    path = d / MANIFEST_NAME
    if not path.is_file():
        raise ConfigError(f"{path} not found: no manifest.json, so {d} is not an engine directory (build one with "
                          "`dflash-trt build`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path} is not valid JSON ({err}): rebuild the engine directory") from None
    if not isinstance(manifest, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(manifest).__name__}")
    if manifest.get("format") != MANIFEST_FORMAT:
        raise ConfigError(f"{path}: format is {manifest.get('format')!r}, expected {MANIFEST_FORMAT!r}")
    if manifest.get("format_version") not in MANIFEST_VERSIONS:
        raise ConfigError(f"{path}: format_version {manifest.get('format_version')!r} is not supported by this "
                          f"dflash-trt (supports {', '.join(map(str, MANIFEST_VERSIONS))}): rebuild the engine or "
                          "upgrade dflash-trt")
    return manifest


def resolve(engine_dir: str | os.PathLike, p: str | os.PathLike) -> Path:
    """A path from the manifest: absolute as written, else relative to the engine directory."""
    path = Path(p).expanduser()
    return path if path.is_absolute() else Path(engine_dir) / path


def manifest_path(manifest: dict, engine_dir: str | os.PathLike, section: str, key: str = "path",
                  required: bool = True) -> Path | None:
    """`manifest[section][key]` resolved against the engine directory; ConfigError when required and missing."""
    entry = manifest.get(section)
    value = entry.get(key) if isinstance(entry, dict) else None
    if not isinstance(value, str) or not value:
        if required:
            raise ConfigError(f"{Path(engine_dir) / MANIFEST_NAME}: field '{section}.{key}' is missing; rebuild the "
                              "engine directory")
        return None
    return resolve(engine_dir, value)


def sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return "sha256:" + h.hexdigest()


def verify_files(manifest: dict, engine_dir: str | os.PathLike, *, checksums: bool = False) -> None:
    """Every file manifest.json lists (`checksums`: relative path -> sha256) exists in the engine directory with its
    recorded size (`file_sizes`; older manifests have only the checksums); with checksums=True its sha256 is recomputed too (a full
    read: `doctor` does it, loading does not). ConfigError naming the first bad file and the fix."""
    d = Path(engine_dir)
    where = d / MANIFEST_NAME
    listed = manifest.get("checksums") or {}  # a hand-written manifest may list none
    sizes = manifest.get("file_sizes") or {}
    if not isinstance(listed, dict) or not isinstance(sizes, dict):
        raise ConfigError(f"{where}: field 'checksums' (or 'file_sizes') is not an object of file -> value; rebuild "
                          "the engine directory")
    for rel, digest in listed.items():
        path = d / rel
        if not path.is_file():
            raise ConfigError(f"{path}: listed in {where} but missing; the engine directory is incomplete: restore "
                              "it or rebuild it")
        if rel in sizes and path.stat().st_size != sizes[rel]:
            raise ConfigError(f"{path}: {path.stat().st_size} bytes, {where} records {sizes[rel]}; the file is "
                              "truncated or was changed: restore it or rebuild the engine directory")
        if checksums and sha256(path) != digest:
            raise ConfigError(f"{path}: its sha256 differs from {where} ({digest}); the file is corrupt or was "
                              "changed: restore it or rebuild the engine directory")


def runtime_budget(manifest: dict, verify_len: int | None, draft: str | None) -> tuple[int | None, str | None]:
    """(verify_len, draft) a run uses: the command line's if it gives either, else the engine directory's —
    `runtime.draft` ("chain:K" / "auto") when the build recorded one, else `runtime.verify_len`."""
    if verify_len is not None or draft is not None:
        return verify_len, draft
    recorded = (manifest.get("runtime") or {}).get("draft")
    return (None, recorded) if recorded is not None else (runtime_verify_len(manifest), None)


def runtime_verify_len(manifest: dict) -> int | None:
    """`runtime.verify_len` (K, slots the target verifies per step), or `runtime.block_size`, its name in manifests
    written before block_size came to mean only the drafter's B."""
    runtime = manifest.get("runtime") or {}
    return runtime.get("verify_len", runtime.get("block_size"))


def draft_prior(manifest: dict, engine_dir: str | os.PathLike) -> list[float] | None:
    """`acceptance.curve`: the served drafter's acceptance per draft position, measured by the build's gate, which the
    torch engine's "auto" draft budget starts from (TorchEngine draft_prior); None where the build measured none (an
    unquantized build runs no gate). ConfigError naming the field where it is not one probability per position."""
    from dflash_trt.spec.budget import prior_problem

    acceptance, drafter = manifest.get("acceptance"), manifest.get("drafter")
    if acceptance is not None and not isinstance(acceptance, dict):
        raise ConfigError(f"{Path(engine_dir) / MANIFEST_NAME}: field 'acceptance' is {type(acceptance).__name__}, "
                          "expected an object or null; rebuild the engine directory")
    curve = acceptance.get("curve") if acceptance else None
    if curve is None:
        return None
    block = drafter.get("block_size") if isinstance(drafter, dict) else None
    problem = prior_problem(curve, block - 1) if isinstance(block, int) and block > 1 else "drafter.block_size is missing"
    if problem:
        raise ConfigError(f"{Path(engine_dir) / MANIFEST_NAME}: field 'acceptance.curve' {problem}; rebuild the engine "
                          "directory (or delete the field: auto then starts from its default prior)")
    return [float(p) for p in curve[: block - 1]]
