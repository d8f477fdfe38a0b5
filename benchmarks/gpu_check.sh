#!/usr/bin/env bash
# Run on the GPU device (see docs/gpu-runs/README.md). Stages: seeds, cuda-tests, all (both), curated
# (evalkit score problems/: the curated solutions).
# Everything worth keeping is written under $OUT.
set -uo pipefail
# A GPU machine with no package registry: missing wheels (e.g. jsonlines) may be carried in .whl/.
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import click, jsonlines, tqdm, torch' || { echo "evalkit's dependencies are missing: pip install -e ." >&2; exit 1; }
export EVALKIT_CACHE=/tmp/evalkit-cache PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } | tee "$OUT/environment.txt"
stage=${1:-all}
run_dir=$(mktemp -d)  # a fresh report folder per stage, so a machine reused between runs never resumes an old one
if [ "$stage" = all ] || [ "$stage" = seeds ]; then
  python3 -m evalkit score submissions/ --out "$run_dir/seeds" --jobs 8 2>&1 | tr '\r' '\n' | grep -v '^evalkit' | tee "$OUT/seeds_score.log"
  cp "$run_dir/seeds/results.jsonl" "$OUT/seeds_results.jsonl"; cp "$run_dir/seeds"/summary.json "$OUT/seeds_summary.json"; cp "$run_dir/seeds"/baselines.json "$OUT/seeds_baselines.json"
fi
if [ "$stage" = all ] || [ "$stage" = cuda-tests ]; then
  python3 -m pytest -q -m cuda tests -p no:cacheprovider -rA 2>&1 | tee "$OUT/pytest_cuda.log"
fi
if [ "$stage" = all ] || [ "$stage" = cuda-tests ]; then
  # The same fixtures once more (builds are cached now), keeping the rows for the record.
  python3 -m evalkit score tests/fixtures/cuda_submissions --problems tests/fixtures/judge_problems --out "$run_dir/cudafx" \
    --baselines eager --timeout 30 --timing-trials 20 --seed 3 2>&1 | tr '\r' '\n' | grep -v '^evalkit' | tail -5
  cp "$run_dir/cudafx"/results.jsonl "$OUT/cuda_fixtures_results.jsonl"
fi
if [ "$stage" = curated ]; then
  python3 -m evalkit score problems/ --out "$run_dir/curated" --jobs 8 2>&1 | tr '\r' '\n' | grep -v '^evalkit' | tee "$OUT/curated_score.log"
  cp "$run_dir/curated"/results.jsonl "$OUT/curated_results.jsonl"; cp "$run_dir/curated"/summary.json "$OUT/curated_summary.json"; cp "$run_dir/curated"/baselines.json "$OUT/curated_baselines.json"
fi
