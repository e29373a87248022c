# A/A control for the queues' order: c16_one.py with the code before (d174fbb) in both places of each pair
# (/tmp/s24old first, its copy /tmp/s24old2 second), 5 rounds each
cd /work/main
for i in 1 2 3; do
  for v in old old2; do
    echo "== $v $i"; PYTHONPATH=/tmp/s24$v:. python bench/results/2026-11-28-cpu-s24/c16_one.py 5 | grep "c16 a\|SUMMARY\|factor"
  done
done
