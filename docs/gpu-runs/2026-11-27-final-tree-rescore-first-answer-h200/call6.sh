#!/usr/bin/env bash
# One H200: PROFILING_WORKERS 4 (was 2): passing answers back to back after a warm start (issue 29, profiling).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; } > $OUT/call6_host.txt 2>&1
timeout -k 5 200 python3 benchmarks/first_answer.py --device cuda --problems problems --problem alexnet_conv1 --answer .gpu/plain_alexnet.py --answers 8 --idle 20 > $OUT/call6_first_answer.log 2>&1; echo "first_answer rc $?" >> $OUT/call6_first_answer.log
