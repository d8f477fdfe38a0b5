#!/usr/bin/env bash
# Call 2 on the 4-GPU host: issue 29's corpus (benchmarks/throughput.py --suite corpus) scored by one
# `evalkit score` on all 4 GPUs (its default --gpus all), with nvidia-smi dmon sampling each GPU's use every second.
set -u
# The committed tree (.head/: `git archive HEAD evalkit tests`, carried): uncommitted edits of evalkit/ or tests/
# in the sending checkout are replaced on the device by HEAD's files.
if [ -f .head/COMMIT ]; then rm -rf evalkit tests && cp -a .head/evalkit .head/tests . && echo "evalkit/, tests/ at $(cat .head/COMMIT)"; fi
host="$OUT/host2.txt"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PATH="/tmp/site/bin:$PATH"
fi
export PYTHONPATH="$PWD:$PYTHONPATH" EVALKIT_CACHE=/tmp/evalkit-cache PYTHONUNBUFFERED=1
rm -rf /tmp/tp
{ date -u; echo "evalkit/, tests/ at $(cat .head/COMMIT 2>/dev/null)"; nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,utilization.gpu --format=csv
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; echo "nproc $(nproc)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.device_count(), "GPUs")'; } > "$host" 2>&1
nvidia-smi dmon -s u -d 1 -o DT > "$OUT/dmon.txt" 2>&1 &
dmon=$!
echo "throughput start $(date -u +%s) $(date -u +%T)" >> "$host"
timeout -k 5 ${T_TP:-480} python3 benchmarks/throughput.py --device cuda --suite corpus --keep /tmp/tp \
  --json "$OUT/throughput.json" > "$OUT/throughput.log" 2>&1
echo "throughput rc $? end $(date -u +%s) $(date -u +%T)" >> "$host"
sleep 2; kill $dmon
(cd /tmp/tp && find . \( -name results.jsonl -o -name summary.json -o -name '*.log' -o -name '_corpus.json' \) -print0 \
  | xargs -0 tar czf "$OUT/corpus_rows.tar.gz")
ls -la "$OUT"; cat "$host"; cat "$OUT/throughput.log"
