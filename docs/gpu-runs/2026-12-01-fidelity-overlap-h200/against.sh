#!/usr/bin/env bash
# Does the overlap, or a longer request, move a speedup? benchmarks/fidelity.py on the curated solutions of problems/:
# RUNS evalkit runs (default 2) at the defaults (one judge), each followed by one run with each AGAINST setting
# (default: --judges 2, whose stages overlap each other's outside the timed windows; and --request-length-ms 100),
# all beside the same in-process figures (ROUNDS rounds, default 3), in one call; the GPU's SM clock and power sampled
# beside it. Files go to $OUT/$TAG* (TAG default "").
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; git log -1 --format=%h 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; nproc; } > $OUT/${TAG:-}environment.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv,noheader -lms 500 > /tmp/clocks.csv &
sampler=$!
against=()
IFS=';' read -ra settings <<< "${AGAINST:---judges 2;--request-length-ms 100}"
for setting in "${settings[@]}"; do against+=(--against "$setting"); done
timeout ${FIDELITY_LIMIT_S:-570} python3 benchmarks/fidelity.py --set problems --runs ${RUNS:-2} --rounds ${ROUNDS:-3} \
  "${against[@]}" --keep /tmp/fidelity-$$ --json $OUT/${TAG:-}fidelity.json 2>&1 \
  | grep -v "UserWarning\|_conversion_method" > $OUT/${TAG:-}fidelity.txt
kill $sampler
python3 - /tmp/clocks.csv > $OUT/${TAG:-}clocks_summary.txt <<'PY'
import statistics, sys
rows = [line.split(", ") for line in open(sys.argv[1]) if line.count(",") == 3]
busy = [(float(r[1].split()[0]), float(r[2].split()[0])) for r in rows if r[3].strip() != "0 %"]
for name, values in (("sm MHz", [b[0] for b in busy]), ("power W", [b[1] for b in busy])):
    q = statistics.quantiles(values, n=20) if len(values) > 1 else values * 19
    print(f"{name} while busy ({len(values)} of {len(rows)} samples): p5 {q[0]:.0f}, median {statistics.median(values):.0f}, p95 {q[-1]:.0f}")
PY
grep -h contended_gpu /tmp/fidelity-$$/run*/set*/results.jsonl 2>/dev/null | wc -l | sed 's/^/rows flagged contended_gpu: /' >> $OUT/${TAG:-}fidelity.txt
