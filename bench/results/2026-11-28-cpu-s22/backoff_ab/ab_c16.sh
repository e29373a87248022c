#!/usr/bin/env bash
# Twenty-second session, tried and reverted: probes that find AR still best back off (the interval doubles) only once
# the drafter's curve holds MEASURED_STEPS = 64 steps (in AutoBudget._choose:
#     if self.curve.steps() >= MEASURED_STEPS:
#         self._probe_interval = min(2 * self._probe_interval, self.probe_every * MAX_PROBE_BACKOFF)
# ). "old" = HEAD's package (git archive HEAD dflash_trt into /tmp/s22/old), "new" = the working tree with the change;
# c16then1.py alternating, 3 pairs: round 0 at c = 1 after a c = 16 warm-up, its rate over rounds 1-2's and its AR steps.
# Run from the repository root: bash bench/results/2026-11-28-cpu-s22/backoff_ab/ab_c16.sh
summ() { python3 - "$1" <<'PY'
import re,sys,ast
t=open(sys.argv[1]).read()
r=[float(x) for x in re.findall(r"round \d: ([0-9.]+) tok/s",t)]
steps=ast.literal_eval(t.strip().splitlines()[-1])
ar=sum(v for (k,d),v in steps if k=='c1 r0' and d=='chain:1'); tot=sum(v for (k,d),v in steps if k=='c1 r0')
print(f"r0 {r[0]:.1f} r1-2 {(r[1]+r[2])/2:.1f} ratio {r[0]/((r[1]+r[2])/2):.3f} r0 AR {ar}/{tot}")
PY
}
for i in 1 2 3; do
  PYTHONPATH=/tmp/s22/old python bench/results/2026-11-28-cpu-s22/c16then1.py 16 > /tmp/s22/c16_old$i.txt 2>&1; echo "old $i $(summ /tmp/s22/c16_old$i.txt)"
  PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/c16then1.py 16 > /tmp/s22/c16_new$i.txt 2>&1; echo "new $i $(summ /tmp/s22/c16_new$i.txt)"
done
