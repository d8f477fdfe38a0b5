#!/usr/bin/env bash
# Does one judge in a process of its own, pinned with its worker to two cores as each of two judges is, part less
# from run to run than one judge in the scheduler's own process? DIFF (default judge_process.diff: its spares start
# on its cores and the builds', moved onto its own when taken; judge_process_pinned_spares.diff: the process alone,
# every worker started on its two cores) is reversed on a copy for "old".
# `evalkit score problems/` (the curated solutions, eager baselines timed again each run, one judge) alternated
# between the two trees, a first cold run filling the cache, until LAST_START_S; the rows of each run to /tmp/rows,
# summarized by station_summary.py.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv; nproc; } > $OUT/station_environment.txt
here=$PWD/docs/gpu-runs/2026-12-01-checks-overlap-h200
old=/tmp/oldtree; rm -rf $old; mkdir -p $old; cp -r evalkit problems pyproject.toml $old/
(cd $old && patch -R -p1 < $here/${DIFF:-judge_process.diff}) > $OUT/station_patch.txt 2>&1
grep -c "slot.gpu is None" $old/evalkit/schedule/backend.py evalkit/schedule/backend.py >> $OUT/station_patch.txt
mkdir -p /tmp/rows; number=0
for name in ${SEQUENCE:-new old new old new old new}; do
  number=$((number + 1))
  [ $SECONDS -lt ${LAST_START_S:-470} ] || break
  root=$PWD; [ $name = old ] && root=$old
  (cd $root && PYTHONPATH=/tmp/site:$root timeout $(( ${LAST_START_S:-470} + 110 - SECONDS )) python3 -m evalkit score \
    problems --problems problems --out /tmp/run$number --baselines eager --device cuda --remeasure-baselines \
    --no-progress -q --judges 1 > /tmp/run$number.log 2>&1)
  cp /tmp/run$number/results.jsonl /tmp/rows/run${number}_$name.jsonl 2>/dev/null
  echo "run $number ($name) done at $SECONDS s, exit $?" >> $OUT/station_runs.txt
done
python3 $here/station_summary.py /tmp/rows > $OUT/station_summary.txt 2>&1
tar czf $OUT/station_rows.tar.gz -C /tmp rows
