#!/usr/bin/env bash
# Call 2: the harness's own parts of a request beyond its calls' events (benchmarks/request_parts.py), for every
# problem's reference and curated solutions; the solutions' extensions are built first, all at once.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 TORCH_EXTENSIONS_DIR=/tmp/ext
date -u
for f in problems/*/solutions/*.py; do
  python3 -c "import importlib.util,sys; s=importlib.util.spec_from_file_location('m', sys.argv[1]); m=importlib.util.module_from_spec(s); s.loader.exec_module(m)" $f > /tmp/build_$(basename $f).log 2>&1 &
done
wait
date -u
python3 benchmarks/request_parts.py problems/* --requests 30 --json $OUT/request_parts.json
date -u
