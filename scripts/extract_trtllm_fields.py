#!/usr/bin/env python3
"""Record the LLM API field names, types and defaults of a TensorRT-LLM checkout as a JSON fact sheet.

    python scripts/extract_trtllm_fields.py \
        --llm-args /path/to/TensorRT-LLM/tensorrt_llm/llmapi/llm_args.py \
        --sampling-params /path/to/TensorRT-LLM/tensorrt_llm/sampling_params.py \
        --commit <sha of the checkout> -o tests/data/trtllm_api_fields.json

It parses the files with `ast` (nothing is imported, so it runs without TensorRT-LLM, torch or a GPU) and writes, for
each selected class, its fields with inheritance resolved inside the file: the annotation as written, the default
(a JSON literal, or the source expression when it is not a literal, or a default_factory), numeric/length
constraints from `Field(...)`, and validation aliases. It also records module-level aliases (`CudaGraphConfig =
DecodeCudaGraphConfig`) and discriminated unions (`SpeculativeConfig: TypeAlias = Annotated[Union[...],
Field(discriminator="decoding_type")]`). `tests/test_trtllm.py` checks the options dflash-trt writes against it, so
re-running this on a newer checkout is how a field rename in TensorRT-LLM shows up as a failing test here.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

LLM_ARGS_CLASSES = ["DecodingBaseConfig", "DFlashDecodingConfig", "KvCacheConfig", "BaseCudaGraphConfig",
                    "DecodeCudaGraphConfig", "BaseLlmArgs", "TorchLlmArgs"]
SAMPLING_CLASSES = ["SamplingParams"]
_CONSTRAINTS = ("ge", "gt", "le", "lt", "min_length", "max_length")
_FIELD_FUNCS = ("Field", "PydanticField")


def _literal(node: ast.AST):
    """(True, value) for a JSON-able literal, else (False, source text)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False, ast.unparse(node)
    try:
        json.dumps(value)
    except TypeError:
        return False, ast.unparse(node)
    return True, value


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def _field_info(annotation: str, value: ast.AST | None) -> dict | None:
    """One field's record, or None for private attributes / class variables."""
    if annotation.startswith("ClassVar"):
        return None
    info: dict = {"type": annotation}
    if value is None:
        info["required"] = True
        return info
    name = _call_name(value)
    if name == "PrivateAttr":
        return None
    if name in _FIELD_FUNCS:
        call: ast.Call = value  # type: ignore[assignment]
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        default_node = call.args[0] if call.args else kwargs.get("default")
        if "default_factory" in kwargs:
            info["default_factory"] = ast.unparse(kwargs["default_factory"])
        elif default_node is None or (isinstance(default_node, ast.Constant) and default_node.value is Ellipsis):
            info["required"] = True
        else:
            ok, v = _literal(default_node)
            info["default" if ok else "default_expr"] = v
        for c in _CONSTRAINTS:
            if c in kwargs:
                ok, v = _literal(kwargs[c])
                info[c] = v if ok else ast.unparse(kwargs[c])
        alias = kwargs.get("validation_alias")
        if alias is not None:
            if _call_name(alias) == "AliasChoices":
                info["aliases"] = [a.value for a in alias.args if isinstance(a, ast.Constant)]
            else:
                ok, v = _literal(alias)
                info["aliases"] = [v] if ok else [ast.unparse(alias)]
        if "alias" in kwargs:
            ok, v = _literal(kwargs["alias"])
            info["alias"] = v if ok else ast.unparse(kwargs["alias"])
        if "init" in kwargs:
            ok, v = _literal(kwargs["init"])
            info["init"] = v
        return info
    if name == "field":  # dataclasses.field
        call = value  # type: ignore[assignment]
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        if "init" in kwargs and _literal(kwargs["init"]) == (True, False):
            return None
        if "default_factory" in kwargs:
            info["default_factory"] = ast.unparse(kwargs["default_factory"])
        elif "default" in kwargs:
            ok, v = _literal(kwargs["default"])
            info["default" if ok else "default_expr"] = v
        return info
    ok, v = _literal(value)
    info["default" if ok else "default_expr"] = v
    return info


def _own_fields(cls: ast.ClassDef) -> tuple[dict, dict]:
    fields, config = {}, {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            if name.startswith("_") or name == "model_config":
                continue
            info = _field_info(ast.unparse(stmt.annotation), stmt.value)
            if info is not None:
                fields[name] = info
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
              and stmt.targets[0].id == "model_config" and _call_name(stmt.value) == "ConfigDict"):
            for k in stmt.value.keywords:  # type: ignore[union-attr]
                ok, v = _literal(k.value)
                config[k.arg] = v if ok else ast.unparse(k.value)
    return fields, config


def _module_tables(tree: ast.Module):
    classes: dict[str, ast.ClassDef] = {}
    aliases: dict[str, str] = {}
    unions: dict[str, dict] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            classes[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if isinstance(stmt.value, ast.Name):
                aliases[stmt.targets[0].id] = stmt.value.id
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            union = _discriminated_union(stmt.value)
            if union is not None:
                unions[stmt.target.id] = union
    return classes, aliases, unions


def _discriminated_union(node: ast.AST) -> dict | None:
    """Annotated[Union[A, B, ...], Field(discriminator="x")] -> {"members": [...], "discriminator": "x"}."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Annotated"):
        return None
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if len(parts) < 2 or not isinstance(parts[0], ast.Subscript):
        return None
    inner = parts[0]
    if not (isinstance(inner.value, ast.Name) and inner.value.id == "Union"):
        return None
    members = inner.slice.elts if isinstance(inner.slice, ast.Tuple) else [inner.slice]
    disc = None
    for extra in parts[1:]:
        if _call_name(extra) in _FIELD_FUNCS:
            for k in extra.keywords:  # type: ignore[union-attr]
                if k.arg == "discriminator" and isinstance(k.value, ast.Constant):
                    disc = k.value.value
    if disc is None:
        return None
    return {"members": [ast.unparse(m) for m in members], "discriminator": disc}


def _resolved(name: str, classes: dict[str, ast.ClassDef], seen=()) -> tuple[list[str], dict, dict]:
    """(bases chain, fields, model_config) of `name`, fields of in-file bases first, own fields overriding."""
    cls = classes[name]
    chain, fields, config = [], {}, {}
    for base in cls.bases:
        bname = ast.unparse(base)
        chain.append(bname)
        if bname in classes and bname not in seen:
            bchain, bfields, bconfig = _resolved(bname, classes, seen + (name,))
            chain += [b for b in bchain if b not in chain]
            fields.update(bfields)
            config.update(bconfig)
    own, own_config = _own_fields(cls)
    fields.update(own)
    config.update(own_config)
    return chain, fields, config


def extract(path: str | Path, class_names: list[str]) -> dict:
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    classes, aliases, unions = _module_tables(tree)
    out: dict = {"classes": {}, "aliases": {}, "discriminated_unions": unions}
    for name in class_names:
        if name not in classes:
            raise SystemExit(f"{path}: class {name} not found (was it renamed? pass --classes to pick others)")
        bases, fields, config = _resolved(name, classes)
        entry: dict = {"bases": bases, "fields": fields}
        if config:
            entry["model_config"] = config
        out["classes"][name] = entry
    for alias, target in aliases.items():
        if target in classes and alias not in classes:
            out["aliases"][alias] = target
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm-args", required=True, help="tensorrt_llm/llmapi/llm_args.py of a checkout")
    ap.add_argument("--sampling-params", help="tensorrt_llm/sampling_params.py of a checkout")
    ap.add_argument("--classes", default=",".join(LLM_ARGS_CLASSES), help="classes of llm_args.py to record")
    ap.add_argument("--commit", default="unknown", help="commit of the llm_args.py checkout (recorded)")
    ap.add_argument("--sampling-commit", default=None, help="commit of sampling_params.py (default: --commit)")
    ap.add_argument("--note", default="", help="free text recorded under source.note")
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)

    facts = extract(args.llm_args, [c for c in args.classes.split(",") if c])
    files = {"tensorrt_llm/llmapi/llm_args.py": args.commit}
    if args.sampling_params:
        sp = extract(args.sampling_params, SAMPLING_CLASSES)
        facts["classes"].update(sp["classes"])
        files["tensorrt_llm/sampling_params.py"] = args.sampling_commit or args.commit
    doc = {
        "source": {"repo": "NVIDIA/TensorRT-LLM", "files": files, "extracted_by": "scripts/extract_trtllm_fields.py",
                   "note": args.note},
        **facts,
    }
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
