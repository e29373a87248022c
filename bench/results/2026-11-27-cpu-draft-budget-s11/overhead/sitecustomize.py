# logs, per server process, what the scheduler hands the budget as each window's seconds per step, against the table
import atexit, collections, os, statistics, json
try:
    from dflash_trt.spec import budget as _B
    _log = collections.defaultdict(list)
    def _wrap(cls):
        f = cls.observe_time
        def g(self, n, draft, s, length=None):
            table = getattr(self, "cost", None)
            base = table.cost(n, draft, length) if table is not None else None
            _log[(n, str(draft))].append((s, base, table.drift if table is not None else None))
            return f(self, n, draft, s, length)
        cls.observe_time = g
    _wrap(_B.AutoBudget); _wrap(_B.Fixed)
    # the scheduler's split: window vs host work between windows
    from dflash_trt.engines import scheduler as _S
    _split = collections.defaultdict(list)
    _dec = _S.BatchScheduler._decode
    import time as _t
    def _decode(self, batch, short=False):
        lw = self._last_window
        if lw is not None:
            n, draft, length, seconds, ended, prefill_s = lw
            between = _t.perf_counter() - ended - (self.prefill_s - prefill_s)
            _split[(n, str(draft))].append((seconds, between))
        return _dec(self, batch, short)
    _S.BatchScheduler._decode = _decode
    def _dump():
        if not _log:
            return
        out = {}
        for k, v in _log.items():
            out[f"{k[0]} {k[1]}"] = {"windows": len(v), "observed_ms": 1e3 * statistics.median(x[0] for x in v),
                                     "table_ms": 1e3 * statistics.median(x[1] for x in v if x[1]) if any(x[1] for x in v) else None,
                                     "drift_end": v[-1][2]}
        for k, v in _split.items():
            d = out.setdefault(f"{k[0]} {k[1]}", {})
            d["window_ms"] = 1e3 * statistics.median(x[0] for x in v)
            d["between_ms"] = 1e3 * statistics.median(x[1] for x in v)
        with open(f"/tmp/s11/hook/log-{os.getpid()}.json", "w") as fh:
            json.dump(out, fh, indent=1)
    atexit.register(_dump)
except Exception as e:  # not the server
    pass
