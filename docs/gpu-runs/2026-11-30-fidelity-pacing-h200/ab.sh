#!/usr/bin/env bash
# Call 3: the timed window before and after this change (inputs copied in before the clock, the freeze looked at
# without sleeps first), in one call: `evalkit score problems/` with the code before (`before/`, a copy of evalkit/ at
# the parent commit, carried with the call), then benchmarks/fidelity.py on this tree (one evalkit run and the
# in-process rounds), then the code before again while time is left. Rows of the runs before go to $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
before() {
  (cd before && PYTHONPATH=/tmp/site:$PWD python3 -m evalkit score ../problems --problems ../problems --out /tmp/before$1 \
     --baselines eager --device cuda --remeasure-baselines --no-progress -q > /dev/null 2>&1)
  cp /tmp/before$1/results.jsonl $OUT/before$1_results.jsonl
  echo "before run $1 done at $SECONDS s" >> $OUT/ab.txt
}
before 1
PYTHONPATH=/tmp/site:$PWD python3 benchmarks/fidelity.py --set problems --runs 1 --rounds 3 --keep /tmp/after \
  --json $OUT/after_fidelity.json 2>&1 | grep -v "UserWarning\|_conversion_method" > $OUT/after_fidelity.txt
echo "after run and in-process rounds done at $SECONDS s" >> $OUT/ab.txt
[ $SECONDS -lt ${SECOND_BEFORE_BY_S:-420} ] && before 2
