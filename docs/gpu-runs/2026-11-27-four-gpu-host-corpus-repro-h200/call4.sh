#!/usr/bin/env bash
# 4-GPU host, call 4 (call 3's machine, warm: builds cached): the curated set 3 rounds, each round on all four GPUs
# at once, one evalkit process per GPU (issue 26: run to run, GPU to GPU, judge vs claim; issue 29: every GPU of the host).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 EVALKIT_CACHE=/tmp/evalkit-cache
ls /tmp/evalkit-cache/builds | wc -l > $OUT/call4_host.txt; { date -u; nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv; } >> $OUT/call4_host.txt 2>&1
t0=$(date +%s)
timeout -k 5 540 python3 benchmarks/reproducibility.py --filled --runs 3 --gpus 0,1,2,3 --keep /tmp/k4 --json $OUT/call4_repro.json > $OUT/call4_repro.log 2>&1
echo "rc $? after $(( $(date +%s) - t0 )) s" >> $OUT/call4_host.txt
(cd /tmp && tar czf $OUT/call4_rows.tar.gz k4/*/results.jsonl k4/*/baselines.json 2>/dev/null)
