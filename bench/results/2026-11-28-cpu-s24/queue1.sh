# c16_windows.py, the code before (d174fbb, /tmp/s24old) and this session's alternating, 5 rounds each
cd /work/main
for i in 1 2 3; do
  for v in old new; do
    if [ $v = old ]; then P=/tmp/s24old:.; else P=.; fi
    echo "== $v $i"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_windows.py 5 | grep -v "^    fed AR n=[0-9] \|^    fed AR n=1[0-3] "
  done
done
