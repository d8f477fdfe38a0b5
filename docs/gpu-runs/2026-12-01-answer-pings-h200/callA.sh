#!/usr/bin/env bash
# Call A (issue 43, item 1): an answer takes its live baseline's pings instead of pinging its own worker (the
# change this record is about). A cold step fills the cache; then a new server and two steps each, one judge, group
# 4, --timing-trials 10, alternated between this tree (new) and the same tree with the change reversed (old:
# answer_pings.diff applied backwards to a copy).
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
here=$PWD/docs/gpu-runs/2026-12-01-answer-pings-h200
old=/tmp/oldtree; rm -rf $old; mkdir -p $old; cp -r evalkit benchmarks problems pyproject.toml $old/
(cd $old && { patch -R -p1 < $here/answer_pings.diff || git apply -R $here/answer_pings.diff; }) > $OUT/patch.txt 2>&1
grep -c "start=False" $old/evalkit/judge/submission_judge.py evalkit/judge/submission_judge.py >> $OUT/patch.txt
run a_cold $PWD 4 1 170 "--judges 1 --timing-trials 10"
for name in new old new; do
  [ $SECONDS -lt 430 ] || break
  root=$PWD; [ $name = old ] && root=$old
  run a_${name}$SECONDS $root 4 2 85 "--judges 1 --timing-trials 10"
done
finish_record
