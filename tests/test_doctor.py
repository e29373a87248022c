"""`dflash-trt doctor`: what this machine reports, and whether engine directories can run here (exit 0 / 1 / 2).

On this machine (CPU only, no TensorRT-LLM): the report says "no GPU" and what that rules out; a manifest that needs a
GPU, the trtllm backend or an unmounted target checkpoint exits 1; a CPU torch-backend manifest exits 0 (also with an
fp8 drafter, dequantized on load); a missing / corrupt / wrong-version / wrongly-typed manifest or an incomplete
engine directory exits 2 with one `dflash-trt doctor: error:` line. GPU cases (B300 / H100 / A100 machines) are checked
on the decision function itself with explicit `Machine` descriptions: which GPUs, how many, which TensorRT-LLM.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dflash_trt import doctor
from dflash_trt.cli import main
from dflash_trt.errors import ConfigError

HAS_CUDA = torch.cuda.is_available()
cpu_only = pytest.mark.skipif(HAS_CUDA, reason="checks what a machine without a GPU reports")


def manifest(target: Path, **over) -> dict:
    m = {
        "format": "dflash-trt-engine", "format_version": 1, "created": "2026-11-22T03:00:00Z",
        "dflash_trt_version": "0.1.0", "backend": "torch",
        "target": {"path": str(target), "model_type": "qwen3", "num_hidden_layers": 4, "hidden_size": 256,
                   "vocab_size": 2048},
        "drafter": {"path": "drafter", "source": "/src/drafter", "quantization": "none", "num_hidden_layers": 1,
                    "block_size": 16, "mask_token_id": 1, "target_layer_ids": [1, 2, 3]},
        "runtime": {"device": "cpu", "dtype": "float32", "max_batch_size": 8, "max_seq_len": 2048, "verify_len": 16,
                    "cuda_graph_batch_sizes": [1, 2, 4, 8], "kv_cache_free_gpu_memory_fraction": 0.9,
                    "tensor_parallel_size": 1},
        "requirements": {"gpu": False, "num_gpus": 0, "min_compute_capability": None, "python_packages": []},
        "triton": {"model_repository": "triton/model_repository", "model_name": "dflash"},
        "trtllm": None,
    }
    for dotted, value in over.items():
        cur = m
        *head, last = dotted.split("__")
        for part in head:
            cur = cur[part]
        cur[last] = value
    return m


@pytest.fixture()
def engine(tmp_path):
    """engine(**overrides) -> an engine directory: manifest.json, drafter/, triton/model_repository/, and a target
    checkpoint directory (config.json) outside it, referenced by absolute path."""
    target = tmp_path / "models" / "target"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")

    count = iter(range(1000))

    def make(name=None, **over):
        d = tmp_path / (name or f"engine{next(count)}")
        (d / "drafter").mkdir(parents=True)
        (d / "triton" / "model_repository" / "dflash").mkdir(parents=True)
        m = manifest(target, **over)
        if m["backend"] == "trtllm":
            (d / "trtllm").mkdir()
            (d / "trtllm" / "llm_api_options.yaml").write_text("speculative_config: {decoding_type: DFlash}\n")
            m["trtllm"] = m["trtllm"] or {"llm_api_options": "trtllm/llm_api_options.yaml"}
        (d / "manifest.json").write_text(json.dumps(m, indent=2))
        return d

    return make


def run_cli(args, capsys) -> tuple[int, str, str]:
    code = main(["doctor", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- this machine ---------------------------------------------------------------------------------------------------

@cpu_only
def test_reports_no_gpu_and_what_it_means(capsys):
    code, out, err = run_cli([], capsys)
    assert code == doctor.EXIT_OK and err == ""
    assert "no GPU" in out
    assert "the trtllm backend cannot run" in out and "The torch backend runs on CPU" in out
    assert "FP8 and NVFP4 need a GPU" in out
    assert f"torch: {importlib.metadata.version('torch')}" in out  # the installed distribution's version
    if doctor.probe_packages()["tensorrt_llm"] is None:
        assert "TensorRT-LLM: not installed" in out and "backend trtllm cannot build or run" in out


def test_json_report_matches_the_machine(capsys):
    code, out, _ = run_cli(["--json"], capsys)
    report = json.loads(out)
    assert code == report["exit_code"] == 0
    assert report["packages"]["torch"] == importlib.metadata.version("torch")
    assert torch.__version__.split("+")[0] == report["packages"]["torch"].split("+")[0]
    assert len(report["gpus"]) == (torch.cuda.device_count() if HAS_CUDA else 0)
    assert report["torch_cuda"] == torch.version.cuda

    for name, module in (("tensorrt_llm", "tensorrt_llm"), ("modelopt", "modelopt")):
        assert (report["packages"][name] is None) == (importlib.util.find_spec(module) is None)
    assert report["engine"] is None and report["limitations"]


def test_trtllm_dflash_requirement_here(capsys):
    code, out, _ = run_cli(["--require", "trtllm-dflash"], capsys)
    supported, detail = doctor.trtllm_dflash_support()
    assert code == (0 if supported else 1)
    if supported is None and doctor.probe_packages()["tensorrt_llm"] is None:
        assert "required trtllm-dflash: NOT MET — TensorRT-LLM is not installed" in out


# ---- engine directories on this machine -----------------------------------------------------------------------------

def test_cpu_torch_engine_runs_here(engine, capsys):
    d = engine()
    code, out, err = run_cli(["--engine-dir", str(d)], capsys)
    assert code == doctor.EXIT_OK, out
    assert "can run here" in out and "torch backend on" in out and err == ""


def test_fp8_drafter_on_torch_backend_cpu_runs_dequantized(engine, capsys):
    d = engine(drafter__quantization="fp8", runtime__device="auto")
    code, out, _ = run_cli(["--engine-dir", str(d), "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["engine_runs_here"] is True
    assert any("dequantized" in n for n in report["engine"]["notes"])


@cpu_only
def test_gpu_engine_cannot_run_here(engine, capsys):
    d = engine(runtime__device="cuda", requirements__gpu=True, requirements__num_gpus=1,
               requirements__min_compute_capability=[8, 9], drafter__quantization="fp8")
    code, out, _ = run_cli(["--engine-dir", str(d)], capsys)
    assert code == doctor.EXIT_CANNOT_RUN
    assert "CANNOT run here" in out and "needs a CUDA GPU (runtime.device is cuda) and there is no GPU here" in out


@cpu_only
def test_trtllm_engine_cannot_run_here(engine, capsys):
    d = engine(backend="trtllm", runtime__device="cuda", drafter__quantization="nvfp4", requirements__gpu=True,
               requirements__num_gpus=8, requirements__min_compute_capability=[10, 0],
               requirements__python_packages=["tensorrt_llm"], runtime__tensor_parallel_size=8)
    code, out, _ = run_cli(["--engine-dir", str(d), "--json"], capsys)
    report = json.loads(out)
    assert code == 1 and report["exit_code"] == 1 and report["engine_runs_here"] is False
    problems = " | ".join(report["engine"]["problems"])
    assert "backend trtllm needs a CUDA GPU" in problems
    if doctor.probe_packages()["tensorrt_llm"] is None:
        assert "needs the Python package 'tensorrt_llm'" in problems


def test_unmounted_target_cannot_run_here(engine, tmp_path, capsys):
    d = engine(target__path=str(tmp_path / "not-mounted" / "gpt-oss-120b"))
    code, out, _ = run_cli(["--engine-dir", str(d)], capsys)
    assert code == 1 and "does not exist here: mount it" in out


# ---- bad input: exit 2, one line -------------------------------------------------------------------------------------

def test_missing_manifest_is_bad_input(tmp_path, capsys):
    code, out, err = run_cli(["--engine-dir", str(tmp_path)], capsys)
    assert code == doctor.EXIT_BAD_INPUT == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dflash-trt doctor: error: ") and "manifest.json not found" in err


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"format": "something-else", "format_version": 1}', "expected 'dflash-trt-engine'"),
    ('{"format": "dflash-trt-engine", "format_version": 99}', "format_version 99 is not supported"),
])
def test_corrupt_manifest_is_bad_input(tmp_path, capsys, content, message):
    (tmp_path / "manifest.json").write_text(content)
    code, _, err = run_cli(["--engine-dir", str(tmp_path)], capsys)
    assert code == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize("over, message", [
    ({"requirements__gpu": "yes"}, "field 'requirements.gpu' is 'yes', expected true/false"),
    ({"requirements__num_gpus": True}, "field 'requirements.num_gpus' is True, expected an integer"),
    ({"requirements__min_compute_capability": [10]}, "requirements.min_compute_capability [10] is not [major, minor]"),
    ({"backend": "vllm"}, "backend 'vllm' is not 'torch' or 'trtllm'"),
    ({"drafter__quantization": "int4"}, "drafter.quantization 'int4' is not none, fp8 or nvfp4"),
    ({"runtime__device": "gpu"}, "runtime.device 'gpu' is not cpu, cuda[:N] or auto"),
])
def test_wrong_fields_are_bad_input(engine, capsys, over, message):
    d = engine(**over)
    code, _, err = run_cli(["--engine-dir", str(d)], capsys)
    assert code == 2 and message in err, err


def test_incomplete_engine_dir_is_bad_input(engine, capsys):
    d = engine(backend="trtllm")
    (d / "trtllm" / "llm_api_options.yaml").unlink()
    code, _, err = run_cli(["--engine-dir", str(d)], capsys)
    assert code == 2 and "llm_api_options.yaml: named by manifest.json trtllm.llm_api_options but missing" in err
    d2 = engine(name="engine2")
    (d2 / "drafter").rmdir()
    code, _, err = run_cli(["--engine-dir", str(d2)], capsys)
    assert code == 2 and "the drafter directory named by manifest.json drafter.path is missing" in err


def test_console_script_exit_codes(engine, tmp_path):
    """The installed `dflash-trt` entry point (what the Docker ENTRYPOINT runs): 0 / 1 / 2, no traceback."""
    exe = Path(sys.executable).parent / "dflash-trt"
    cmd = [str(exe)] if exe.is_file() else [sys.executable, "-m", "dflash_trt"]
    ok = subprocess.run(cmd + ["doctor", "--engine-dir", str(engine())], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run(cmd + ["doctor", "--engine-dir", str(tmp_path / "nope")], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
    if not HAS_CUDA:
        gpu = engine(name="gpu-engine", runtime__device="cuda:0")
        no = subprocess.run(cmd + ["doctor", "--engine-dir", str(gpu)], capture_output=True, text=True, timeout=300)
        assert no.returncode == 1 and "CANNOT run here" in no.stdout


# ---- the decision logic for GPU machines (explicit machine descriptions) --------------------------------------------

def b300(n=8, trtllm="1.3.0rc27", dflash=True) -> doctor.Machine:
    gpus = [doctor.GPU(i, "NVIDIA B300 SXM6 AC", (10, 3), 268.0) for i in range(n)]
    return doctor.Machine(gpus=gpus, packages={"torch": "2.10.0", "tensorrt_llm": trtllm, "modelopt": "0.47.0",
                                               "tensorrt": "10.14", "transformers": "4.57.1"},
                          trtllm_dflash=dflash, trtllm_dflash_detail="llm_args.py",
                          torch_cuda="13.0")


def gpus(name, cc, n=1) -> doctor.Machine:
    m = b300(n)
    m.gpus = [doctor.GPU(i, name, cc, 80.0) for i in range(n)]
    return m


def tp8_nvfp4(target) -> dict:
    return manifest(target, backend="trtllm", runtime__device="cuda", drafter__quantization="nvfp4",
                    runtime__tensor_parallel_size=8, requirements__gpu=True, requirements__num_gpus=8,
                    requirements__min_compute_capability=[10, 0], requirements__python_packages=["tensorrt_llm"])


def check(engine_factory, m: dict, machine: doctor.Machine) -> doctor.EngineCheck:
    d = engine_factory()
    (d / "manifest.json").write_text(json.dumps(m))
    if m["backend"] == "trtllm":
        (d / "trtllm").mkdir(exist_ok=True)
        (d / "trtllm" / "llm_api_options.yaml").write_text("x: 1\n")
        m["trtllm"] = {"llm_api_options": "trtllm/llm_api_options.yaml"}
        (d / "manifest.json").write_text(json.dumps(m))
    return doctor.check_engine(d, machine)


def _target(engine_factory) -> Path:
    return Path(json.loads((engine_factory(name="probe") / "manifest.json").read_text())["target"]["path"])


def test_gpt_oss_tp8_nvfp4_runs_on_b300(engine, monkeypatch):
    monkeypatch.setattr(doctor, "_installed", lambda pkg: "1.3.0rc27")
    chk = check(engine, tp8_nvfp4(_target(engine)), b300())
    assert chk.runs_here, chk.problems


def test_gpt_oss_tp8_nvfp4_cannot_run_on_4_gpus_h100_or_old_trtllm(engine):
    t = _target(engine)
    assert any("needs 8 GPUs" in p for p in check(engine, tp8_nvfp4(t), b300(n=4)).problems)
    h100 = check(engine, tp8_nvfp4(t), gpus("NVIDIA H100 80GB HBM3", (9, 0), 8)).problems
    assert any("needs compute capability >= 10.0" in p for p in h100)
    assert any("NVFP4 (sm_100+)" in p and "sm_90" in p for p in h100)
    old = check(engine, tp8_nvfp4(t), b300(trtllm="1.2.1", dflash=False)).problems
    assert any("needs DFlashDecodingConfig" in p for p in old)


def test_fp8_drafter_needs_sm89_on_trtllm(engine):
    t = _target(engine)
    m = manifest(t, backend="trtllm", runtime__device="cuda", drafter__quantization="fp8", requirements__gpu=True,
                 requirements__num_gpus=1)
    a100 = check(engine, dict(m), gpus("NVIDIA A100-SXM4-80GB", (8, 0))).problems
    assert any("FP8 (sm_89+)" in p for p in a100)
    assert check(engine, json.loads(json.dumps(m)), gpus("NVIDIA H100 80GB HBM3", (9, 0))).runs_here
    # the same drafter on the torch backend dequantizes: runs on the A100, and on CPU
    torch_m = manifest(t, drafter__quantization="fp8", runtime__device="auto")
    assert check(engine, torch_m, gpus("NVIDIA A100-SXM4-80GB", (8, 0))).runs_here
    cpu = doctor.Machine(packages={"torch": "2.13.0"})
    assert check(engine, json.loads(json.dumps(torch_m)), cpu).runs_here


def test_device_index_and_gpu_count(engine):
    t = _target(engine)
    chk = check(engine, manifest(t, runtime__device="cuda:3"), gpus("NVIDIA H200", (9, 0), 2))
    assert any("cuda:3 but there are only 2 GPU(s)" in p for p in chk.problems)


def test_limitations_name_missing_precisions():
    assert doctor.fp8_ok((8, 9)) and not doctor.fp8_ok((8, 6)) and doctor.nvfp4_ok((10, 3)) and not doctor.nvfp4_ok((9, 0))
    h100 = " ".join(doctor.limitations(gpus("NVIDIA H100 80GB HBM3", (9, 0))))
    assert "no NVFP4 (needs sm_100+; FP8 works)" in h100
    a100 = " ".join(doctor.limitations(gpus("NVIDIA A100-SXM4-80GB", (8, 0))))
    assert "no FP8 (needs sm_89+)" in a100
    b = b300()
    b.plugins = {"loads": True, "compiled": ["sm_90"], "embedded": ["sm_90"], "cuobjdump": ["sm_90"],
                 "runs_on": {str(g.index): False for g in b.gpus}}
    text = " ".join(doctor.limitations(b))
    assert "CUDA plugins hold no code for GPU 0" in text and 'DFLASH_CUDA_ARCHS="103"' in text
    assert "no GPU" not in text and "NVFP4" not in text
    cpu_torch = doctor.Machine(nvml_gpus=[doctor.GPU(0, "NVIDIA B300", (10, 3))], packages={"torch": "2.13.0+cpu"})
    assert "CPU-only build" in " ".join(doctor.limitations(cpu_torch))


def test_require_rejects_unknown_and_reports_plugins():
    with pytest.raises(ConfigError):
        doctor.check_requirement("tensorflow", doctor.Machine())
    m = doctor.Machine(plugins={"loads": False, "error": "x not found"})
    assert "x not found" in doctor.check_requirement("plugins", m)
    assert doctor.check_requirement("gpu", b300()) is None and doctor.check_requirement("gpu", doctor.Machine())


def test_dflash_config_detection_on_trtllm_source_lines():
    # 1.3.0rc14's llm_args.py (as its published source shows it) vs 1.3.0rc13's, where PARD is followed by Auto.
    rc14 = ("class PARDDecodingConfig(DecodingBaseConfig):\n    decoding_type: Literal[\"PARD\"] = \"PARD\"\n\n\n"
            "class DFlashDecodingConfig(DecodingBaseConfig):\n    \"\"\"Configuration for DFlash speculative decoding.\"\"\"\n")
    rc13 = ("class PARDDecodingConfig(DecodingBaseConfig):\n    decoding_type: Literal[\"PARD\"] = \"PARD\"\n\n\n"
            "class AutoDecodingConfig(DecodingBaseConfig):\n    # unlike DFlashDecodingConfig ...\n")
    assert doctor.defines_dflash_config(rc14) and not doctor.defines_dflash_config(rc13)
    assert not doctor.defines_dflash_config("    class DFlashDecodingConfig:  # nested, not the API class\n")


def test_triton_python_requirement():
    m = doctor.Machine(triton={"server": "/opt/tritonserver/bin/tritonserver", "python_backend": None})
    assert "no Triton Python backend" in doctor.check_requirement("triton-python", m)
    m.triton["python_backend"] = "/opt/tritonserver/backends/python"
    assert doctor.check_requirement("triton-python", m) is None
    assert "no tritonserver binary" in doctor.check_requirement("triton-python", doctor.Machine(triton={}))
