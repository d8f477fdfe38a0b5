#!/usr/bin/env bash
# Where does evalkit's speedup part from the in-process method's? benchmarks/fidelity.py on the curated solutions of
# problems/ and the microsecond fixture: RUNS evalkit runs (default 1; EXTRA: more `evalkit score` options), then in
# one process per answer the field's loop and the same two models paced other ways (VARIANTS, default
# kb,gaps,blocks,evalkit: the GPU idle between calls, calls in evalkit's requests, the L2 flushed and outputs kept),
# ROUNDS rounds (default 2), the GPU's SM clock and power sampled beside it all. Files go to $OUT/$TAG* (TAG default
# "").
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > $OUT/environment.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv,noheader -lms 200 > /tmp/clocks.csv &
sampler=$!
timeout ${FIDELITY_LIMIT_S:-560} python3 benchmarks/fidelity.py --set problems --set benchmarks/fixtures \
  --runs ${RUNS:-1} --rounds ${ROUNDS:-2} --variants ${VARIANTS:-kb,gaps,blocks,evalkit} --gap-ms 20 \
  --variant-calls 60 --keep /tmp/fidelity-$$ --extra "${EXTRA:-}" --json $OUT/${TAG:-}fidelity.json 2>&1 \
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
gzip -c /tmp/clocks.csv > $OUT/${TAG:-}clocks.csv.gz
