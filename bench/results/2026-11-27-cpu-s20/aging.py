"""Run a script with CALIBRATION_AGING set to R (1.0: no fade with other drafts' windows):
`python aging.py R script args...` from the repository root."""
import sys, runpy
import dflash_trt.spec.budget as B
v = sys.argv.pop(1)
B.CALIBRATION_AGING = float(v)
script = sys.argv[1]; sys.argv = sys.argv[1:]
runpy.run_path(script, run_name='__main__')
