#!/usr/bin/env bash
# 4-GPU host, call 2 (the machine of call 1, warm: builds cached): the curated set 3 times on GPUs 0,1 with the
# default settle_s and on GPUs 2,3 with --settle 0, all four at once (issue 26 A/B, issue 29 every GPU).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 EVALKIT_CACHE=/tmp/evalkit-cache
ls /tmp/evalkit-cache/builds | wc -l > $OUT/call2_host.txt; { date -u; nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv; } >> $OUT/call2_host.txt 2>&1
t0=$(date +%s)
timeout -k 5 540 python3 benchmarks/reproducibility.py --filled --runs 3 --gpus 0,1 --keep /tmp/kA --json $OUT/call2_repro_settle.json > $OUT/call2_repro_settle.log 2>&1 &
timeout -k 5 540 python3 benchmarks/reproducibility.py --filled --runs 3 --gpus 2,3 --extra='--settle 0' --keep /tmp/kB --json $OUT/call2_repro_nosettle.json > $OUT/call2_repro_nosettle.log 2>&1 &
wait
echo "both done after $(( $(date +%s) - t0 )) s" >> $OUT/call2_host.txt
(cd /tmp && tar czf $OUT/call2_rows.tar.gz kA/*/results.jsonl kB/*/results.jsonl kA/*/baselines.json kB/*/baselines.json 2>/dev/null)
