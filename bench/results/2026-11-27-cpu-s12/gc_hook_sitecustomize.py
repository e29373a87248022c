# logs, per server process, Python's cyclic collections: before / after the engine thread started (count, ms, longest)
import atexit, collections, gc, os, sys, time
_stat = collections.defaultdict(list); _t0 = [0.0]; _started = [None]
def _cb(phase, info):
    if phase == "start":
        _t0[0] = time.perf_counter()
    else:
        _stat[(info["generation"], "serving" if _started[0] else "startup")].append(time.perf_counter() - _t0[0])
gc.callbacks.append(_cb)
try:
    from dflash_trt.serve.openai import runner as _R
    _s = _R.EngineRunner.start
    def _start(self):
        _started[0] = time.perf_counter(); return _s(self)
    _R.EngineRunner.start = _start
except Exception:
    pass
def _dump():
    if "serve" not in " ".join(sys.argv):
        return
    with open(os.environ.get("GCLOG", "/tmp/s12/gclog.txt"), "a") as f:
        f.write(f"{os.getpid()} {sys.argv[0][-30:]} {' '.join(sys.argv)[150:200]} objects {len(gc.get_objects())} frozen {gc.get_freeze_count()}: " + str(
            {g: (len(v), round(1e3 * sum(v), 1), round(1e3 * max(v), 2)) for g, v in sorted(_stat.items())}) + "\n")
atexit.register(_dump)
