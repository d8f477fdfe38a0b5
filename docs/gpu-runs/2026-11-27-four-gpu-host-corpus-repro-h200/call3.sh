#!/usr/bin/env bash
# 4-GPU host, call 3: the synthetic corpus with no settle (issue 29; last session's run had it), then the
# curated set's builds filled for call 4's reproducibility rounds on all four GPUs (issues 26 and 29).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
{ date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,temperature.gpu --format=csv; nproc; free -g | head -2; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > $OUT/call3_host.txt 2>&1
t0=$(date +%s)
timeout -k 5 300 python3 benchmarks/throughput.py --suite corpus --answers 32 --device cuda --json $OUT/call3_throughput.json --keep /tmp/tp > $OUT/call3_throughput.log 2>&1
echo "corpus rc $? after $(( $(date +%s) - t0 )) s" >> $OUT/call3_throughput.log
cp /tmp/tp/corpus_report/summary.json $OUT/call3_summary.json 2>/dev/null
t1=$(date +%s)
EVALKIT_CACHE=/tmp/evalkit-cache timeout -k 5 250 python3 benchmarks/reproducibility.py --fill-only --gpus 0 --keep /tmp/fill > $OUT/call3_fill.log 2>&1
echo "fill rc $? after $(( $(date +%s) - t1 )) s" >> $OUT/call3_fill.log
ls /tmp/evalkit-cache/builds | wc -l >> $OUT/call3_fill.log
