#!/usr/bin/env bash
# 2-GPU host, call 2 (call 1's machine, warm: builds cached): the curated set 3 rounds, each round on both GPUs
# at once, one evalkit process per GPU (issue 26: run to run, GPU to GPU, judge vs claim; issue 29: every GPU of the host).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 EVALKIT_CACHE=/tmp/evalkit-cache
ls /tmp/evalkit-cache/builds | wc -l > $OUT/call2_host.txt; { date -u; nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv; } >> $OUT/call2_host.txt 2>&1
t0=$(date +%s)
timeout -k 5 560 python3 benchmarks/reproducibility.py --filled --runs 3 --gpus 0,1 --keep /tmp/k4 --json $OUT/call2_repro.json > $OUT/call2_repro.log 2>&1
echo "rc $? after $(( $(date +%s) - t0 )) s" >> $OUT/call2_host.txt
(cd /tmp && tar czf $OUT/call2_rows.tar.gz k4/*/results.jsonl k4/*/baselines.json 2>/dev/null)
