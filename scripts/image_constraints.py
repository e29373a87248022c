#!/usr/bin/env python3
"""Pin everything a base image already has, so installing dflash-trt into it cannot replace torch or TensorRT-LLM.

    image_constraints.py freeze [--exclude NAME ...] > constraints.txt   # one `name==version` per installed package
    PIP_CONSTRAINT=constraints.txt pip install ...                       # pip must keep every one of them
    image_constraints.py verify constraints.txt                          # exit 1 if any of them changed or vanished

Why not `pip freeze`: NGC images list some packages as `name @ file:///...` (wheels that are no longer there) or
`-e ...`, which pip cannot use as constraints. This reads the installed distributions' own metadata instead and
writes `name==version` for each (`name===version` for a version PEP 440 cannot parse, which pip matches literally;
local labels such as `2.9.0a0+145a3a7bda.nv25.10` are kept, so only that exact build satisfies the pin). When a
package is installed twice on sys.path, the first one (the one `import` finds) is pinned. dflash-trt itself is never
pinned. Exit status: 0 ok, 1 verify found changes, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys

_PEP440 = re.compile(
    r"^\s*v?(?:(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?"
    r"(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?(?:[-_.]?dev[-_.]?[0-9]*)?)(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?\s*$",
    re.I)
_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.I)
ALWAYS_EXCLUDED = ("dflash-trt",)


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, str]:
    """normalized name -> version of every installed distribution, first on sys.path wins."""
    out: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata is not None else None
        version = dist.version
        if not name or not version or not _NAME.match(name):
            continue  # broken metadata: nothing pip could pin either
        out.setdefault(normalize(name), version)
    return out


def constraint_line(name: str, version: str) -> str:
    return f"{name}=={version}" if _PEP440.match(version) else f"{name}==={version}"


def freeze(exclude: list[str]) -> list[str]:
    skip = {normalize(n) for n in (*ALWAYS_EXCLUDED, *exclude)}
    return [constraint_line(n, v) for n, v in sorted(installed().items()) if n not in skip]


def parse(lines: list[str]) -> dict[str, str]:
    pins = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^([A-Za-z0-9._-]+)\s*===?\s*(\S+)$", line)
        if not m:
            raise ValueError(f"not a name==version pin: {raw.strip()!r}")
        pins[normalize(m.group(1))] = m.group(2)
    return pins


def verify(pins: dict[str, str]) -> list[str]:
    """Every pinned package still installed at the pinned version, else one line per difference."""
    now = installed()
    problems = []
    for name, version in sorted(pins.items()):
        if name not in now:
            problems.append(f"{name}: was {version}, now not installed")
        elif now[name] != version:
            problems.append(f"{name}: was {version}, now {now[name]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("freeze", help="print name==version for every installed distribution")
    f.add_argument("--exclude", action="append", default=[], help="a package to leave unpinned (repeatable)")
    v = sub.add_parser("verify", help="check that every pin of a constraints file is still what is installed")
    v.add_argument("constraints")
    args = parser.parse_args(argv)
    if args.command == "freeze":
        print("\n".join(freeze(args.exclude)))
        return 0
    try:
        with open(args.constraints) as fh:
            pins = parse(fh.readlines())
    except (OSError, ValueError) as err:
        print(f"image_constraints.py verify: {err}", file=sys.stderr)
        return 2
    problems = verify(pins)
    for p in problems:
        print(f"image_constraints.py verify: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"image_constraints.py verify: all {len(pins)} pinned packages unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
