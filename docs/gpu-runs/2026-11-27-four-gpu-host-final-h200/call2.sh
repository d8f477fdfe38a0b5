#!/usr/bin/env bash
# Call 2, on the machine call 1 left warm: the bf16 run of the CUDA fixtures that call 1's side-B timeout cut after
# one row. Sent inline as the `run` command (this file is that command, one step a line). Repository root; $OUT set.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-b .whl/*.whl
export PYTHONPATH=/tmp/site-b:$PWD EVALKIT_CACHE=/tmp/evalkit-cache-b PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
t0=$(date +%s)
CUDA_VISIBLE_DEVICES=2 timeout -k 5 200 python3 -m evalkit score tests/fixtures/cuda_submissions --problems tests/fixtures/judge_problems \
  --out /tmp/bf16b --precision bf16 --baselines eager --timeout 30 --timing-trials 20 --seed 3 > $OUT/bf16_score.log 2>&1
echo "bf16 rc $? after $(( $(date +%s) - t0 )) s"
cp /tmp/bf16b/results.jsonl $OUT/bf16_results.jsonl
tr '\r' '\n' < $OUT/bf16_score.log | grep -v '^evalkit' | tail -8
python3 -c "
import json,sys
for l in open('$OUT/bf16_results.jsonl'):
    r=json.loads(l); print(f\"{r['sample']:24} {r['verdict']:14} {r.get('precision')!s:5} {','.join(r.get('flags') or [])!s:30} {r['reason'][:100]}\")"
