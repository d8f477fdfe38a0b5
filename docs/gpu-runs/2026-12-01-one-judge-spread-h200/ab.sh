#!/usr/bin/env bash
# Why one judge's runs part more than two judges': `evalkit score problems/` (the curated solutions, eager baselines
# timed again each run, one judge) alternated between three copies of this tree, in one call:
#   head:    the tree as it is (the freeze's looks yield the CPU between them; the single judge in the scheduler's
#            process, its workers unpinned)
#   noyield: the looks sleep 0 instead of yielding (the tree before d55a464)
#   process: the single judge in a judge process of its own, its workers pinned to its cores (as with --judges 2)
# Each run's rows to $OUT/runN_VARIANT.jsonl, until AB_LIMIT_S (default 470) seconds have passed.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv; nproc; } > $OUT/environment.txt
for name in head noyield process; do
  mkdir -p /tmp/variants/$name && cp -r evalkit pyproject.toml /tmp/variants/$name/
done
python3 - <<'PY'
from pathlib import Path
for name in ("processes.py", "cgroup.py"):
    path = Path("/tmp/variants/noyield/evalkit/sandbox") / name
    text = path.read_text()
    assert "rest(min(next(pause), remaining))" in text, name
    path.write_text(text.replace("rest(min(next(pause), remaining))", "time.sleep(min(next(pause), remaining))"))
path = Path("/tmp/variants/process/evalkit/schedule/backend.py")
text = path.read_text()
assert "if judges == 1 and slot.gpu in (None, 0):" in text
path.write_text(text.replace("if judges == 1 and slot.gpu in (None, 0):", "if False:"))
PY
grep -c "time.sleep(min(next(pause), remaining))" /tmp/variants/noyield/evalkit/sandbox/{processes,cgroup}.py > $OUT/variants.txt
grep -c "if False:" /tmp/variants/process/evalkit/schedule/backend.py >> $OUT/variants.txt
number=0
for name in ${SEQUENCE:-head head noyield process noyield process head}; do
  number=$((number + 1))
  [ $SECONDS -lt ${AB_LIMIT_S:-470} ] || break
  (cd /tmp/variants/$name && PYTHONPATH=/tmp/site:$PWD timeout $(( ${AB_LIMIT_S:-470} + 110 - SECONDS )) \
     python3 -m evalkit score $OLDPWD/problems --problems $OLDPWD/problems --out /tmp/ab$number --baselines eager \
     --device cuda --remeasure-baselines --no-progress -q > /tmp/ab$number.log 2>&1)
  cp /tmp/ab$number/results.jsonl $OUT/run${number}_$name.jsonl 2>/dev/null
  tail -3 /tmp/ab$number.log > $OUT/run${number}_$name.log
  echo "run $number ($name) done at $SECONDS s" >> $OUT/runs.txt
done
