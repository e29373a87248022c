# c16_one.py at concurrency 16 (5 rounds, 1 ms host work a step), HEAD's code: explore_share 1e-6 (no exploration)
# against the default 0.02, ABBA, 3 pairs: what exploring costs at 16 requests, all of it
cd /work/main
B=bench/results/2026-11-28-cpu-s26
for v in off on on off off on; do
  if [ $v = off ]; then S=1e-6; else S=; fi
  echo "== c16 share-$v"; SHARE=$S PYTHONPATH=. python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|AR  \|fed AR n=16\|plain AR"
done
