#!/usr/bin/env bash
# Issue 43, item 1: the timed requests' float64 checks made while the profile's worker loads (checks_overlap.diff).
# As ../2026-12-01-answer-pings-h200/callB.sh: a cold step fills the cache; then a new server and two steps each, one
# judge, group 4, --timing-trials 10, alternated between this tree (new) and the same tree with the change reversed
# on a copy (old). PREFIX names the runs, SEQUENCE orders them, LAST_START_S is when no further run starts.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
here=$PWD/docs/gpu-runs/2026-12-01-checks-overlap-h200
old=/tmp/oldtree; rm -rf $old; mkdir -p $old; cp -r evalkit benchmarks problems pyproject.toml $old/
(cd $old && { patch -R -p1 < $here/checks_overlap.diff || git apply -R $here/checks_overlap.diff; }) > $OUT/patch.txt 2>&1
grep -c "meanwhile=checks.run" $old/evalkit/judge/submission_judge.py evalkit/judge/submission_judge.py >> $OUT/patch.txt
run ${PREFIX:-a}_cold $PWD 4 1 170 "--judges 1 --timing-trials 10"
for name in ${SEQUENCE:-new old new old}; do
  [ $SECONDS -lt ${LAST_START_S:-420} ] || break
  root=$PWD; [ $name = old ] && root=$old
  run ${PREFIX:-a}_${name}$SECONDS $root 4 2 85 "--judges 1 --timing-trials 10"
done
finish_record
