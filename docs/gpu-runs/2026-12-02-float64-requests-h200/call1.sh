#!/usr/bin/env bash
# Issue 43: where one call's float64 work goes on the H200 (benchmarks/float64_costs.py, every shipped problem),
# this tree against a copy whose reference worker keeps torch's cached GPU memory between requests (its
# `torch.cuda.empty_cache()` after each reply taken out), and the host-to-device copy rate of pinned memory (what a
# host cache of float64 outputs would cost to read back).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
python3 benchmarks/float64_costs.py problems/* --calls 5 --json $OUT/float64.json > $OUT/float64.txt 2>&1
keep=/tmp/keepcache; rm -rf $keep; mkdir -p $keep; cp -r evalkit benchmarks problems pyproject.toml $keep/
sed -i 's/^            torch.cuda.empty_cache()$/            pass  # kept: this copy measures the cache kept/' $keep/evalkit/judge/reference_worker.py
grep -c "pass  # kept" $keep/evalkit/judge/reference_worker.py >> $OUT/float64_keep.txt
(cd $keep && PYTHONPATH=/tmp/site:$keep python3 benchmarks/float64_costs.py problems/* --calls 5 \
  --json $OUT/float64_keep.json) >> $OUT/float64_keep.txt 2>&1
python3 - <<'PY' > $OUT/pinned_copy.txt 2>&1
import time, torch
for gib in (1, 4):
    host = torch.empty(gib * 2**30, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty_like(host, device="cuda")
    for name, dst, src in (("host->device", dev, host), ("device->host", host, dev)):
        times = []
        for _ in range(3):
            torch.cuda.synchronize(); t = time.perf_counter(); dst.copy_(src, non_blocking=True); torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        print(f"{gib} GiB pinned {name}: {min(times)*1e3:.1f} ms, {gib / min(times):.1f} GiB/s")
    del host, dev
PY
