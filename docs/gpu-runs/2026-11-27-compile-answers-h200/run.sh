set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD EVALKIT_CACHE=/tmp/ec
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' | tee -a $OUT/env.txt
for p in bf16 fp32; do
  timeout 100 python3 -m evalkit score "$(dirname "$0")"/subs --problems tests/fixtures/judge_problems --out /tmp/r_$p --device cuda \
    --precision $p --baselines eager --timing-trials 5 --seed 3 > $OUT/score_$p.log 2>&1
  echo "$p exit $?"
  cp /tmp/r_$p/results.jsonl $OUT/results_$p.jsonl 2>/dev/null
  python3 - "$OUT/results_$p.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    c = r.get("correctness") or {}
    print(r["precision"], r["sample"], r["verdict"], r["flags"], c.get("custom_time_share"), (c.get("kernels") or [])[:4], r["reason"][:160])
PY
done
