"""`dflash-trt build`: build configs (config.py), the pre-flight plan (plan.py), ModelOpt drafter quantization
(quantize.py), the acceptance gate (gate.py), the engine directory (engine_dir.py) and the builder (builder.py)."""
