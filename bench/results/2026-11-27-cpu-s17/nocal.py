"""replay_delay.py with auto's calibration factors held at 1 (Calibration.factors patched): whether the c = 4 AR hold
needs the calibration. `nocal.py 4 3 c8 profile delay=0.001`."""
import runpy, sys
from dflash_trt.spec import budget as B
B.Calibration.factors = lambda self, drafts: dict.fromkeys(drafts, 1.0)
sys.argv = ["replay_delay.py"] + sys.argv[1:]
runpy.run_path("bench/results/2026-11-27-cpu-s17/replay_delay.py", run_name="__main__")
