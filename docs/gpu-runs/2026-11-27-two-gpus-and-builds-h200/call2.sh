#!/usr/bin/env bash
# Call 2 (issue 29 on one GPU host): a real answer's build split, one answer alone, the seeds scored then rescored.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; fi
export PYTHONPATH=/tmp/site:$PWD EVALKIT_CACHE=/tmp/ec2 PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
stamp() { date +%s.%N; }
seed=submissions/seeds/alexnet_conv1/003_c9685edec9fcfe50.txt
{ nproc; free -g | head -2; nvidia-smi --query-gpu=index,name --format=csv,noheader; } > "$OUT/call2_host.txt"
# 1. where one real answer's build goes (steps one at a time)
timeout 200 python3 benchmarks/build_costs.py "$seed" --json "$OUT/build_costs.json" > "$OUT/build_costs.log" 2>&1
echo "build_costs rc $?" >> "$OUT/build_costs.log"
# 2. one answer alone, every cache fresh (build, baselines, judge)
mkdir -p /tmp/one/seeds/alexnet_conv1 && cp "$seed" /tmp/one/seeds/alexnet_conv1/
t0=$(stamp); timeout 200 python3 -m evalkit score /tmp/one --problems problems --out /tmp/r-one --no-progress > "$OUT/one_answer.log" 2>&1
echo "one answer: rc $? wall $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" $(stamp) $t0) s" >> "$OUT/one_answer.log"
cp /tmp/r-one/results.jsonl "$OUT/one_answer_results.jsonl"
# 3. the five seeds scored (the one above cached), then rescored into a new report
t0=$(stamp); timeout 200 python3 -m evalkit score submissions/ --out /tmp/r-seeds --no-progress > "$OUT/seeds.log" 2>&1
echo "seeds: rc $? wall $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" $(stamp) $t0) s" >> "$OUT/seeds.log"
for n in 1 2 3; do
  t0=$(stamp); timeout 100 python3 -m evalkit score submissions/ --out /tmp/r-rescore$n --no-progress > "$OUT/rescore$n.log" 2>&1
  echo "rescore $n: rc $? wall $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" $(stamp) $t0) s" >> "$OUT/rescore$n.log"
done
cp /tmp/r-seeds/results.jsonl "$OUT/seeds_results.jsonl"; cp /tmp/r-rescore1/results.jsonl "$OUT/rescore1_results.jsonl"
cp /tmp/r-rescore1/summary.json "$OUT/rescore1_summary.json"
tail -n 2 "$OUT"/*.log
