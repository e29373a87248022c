cd /work/main
for i in 1 2 3 4; do
  if [ $((i % 2)) = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "== $v $i"; TOKENS=128 PYTHONPATH=/tmp/s30/$v:. python bench/results/2026-11-28-cpu-s25/cold_c8.py $i 8 2>&1 | grep -A1 "^run"
  done
done
for m in chain:4 chain:8; do echo "== fixed $m"; TOKENS=128 PYTHONPATH=/tmp/s30/fin:. python bench/results/2026-11-28-cpu-s25/cold_c8.py 9 8 $m 2>&1 | grep -A1 "^run"; done
echo DONE
