"""GPU compute capabilities the drafter formats need: the one place these thresholds live (the torch engine's FP8
GEMMs, TensorRT-LLM's requirements and `doctor` read them here). No torch import: doctor runs without torch."""

FP8_MIN_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (sm_89), Hopper (sm_90) and newer
NVFP4_MIN_CAPABILITY = (10, 0)  # FP4 tensor cores: Blackwell (sm_100, sm_103) and newer
# The torch engine's decode loops: "host" (one host read per step), "device" (steps_per_sync steps per host read, CUDA
# graphs on a GPU with the plugin kernels) and "auto" (device where those graphs run, else host: the default).
DECODE_LOOPS = ("auto", "host", "device")
