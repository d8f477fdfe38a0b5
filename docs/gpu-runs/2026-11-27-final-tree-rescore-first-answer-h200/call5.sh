#!/usr/bin/env bash
# One H200, final tree: the tests a CPU skips.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > $OUT/call5_environment.txt 2>&1
timeout -k 5 570 python3 -m pytest -q -m cuda tests -p no:cacheprovider -rA --durations=15 > $OUT/pytest_cuda.log 2>&1; echo "pytest rc $?" >> $OUT/pytest_cuda.log
