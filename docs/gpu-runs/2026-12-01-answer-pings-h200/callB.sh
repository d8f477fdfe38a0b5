#!/usr/bin/env bash
# Call B (issue 43, item 1): a problem left keeps its live baseline (the record's second change). As call A: a cold
# step fills the cache; then a new server and two steps each, one judge, group 4, --timing-trials 10, alternated
# between this tree (new) and the same tree with that change reversed (old: kept_partners.diff applied backwards).
# Call C is the same with PREFIX=c SEQUENCE="old new old new" LAST_START_S=400.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
here=$PWD/docs/gpu-runs/2026-12-01-answer-pings-h200
old=/tmp/oldtree; rm -rf $old; mkdir -p $old; cp -r evalkit benchmarks problems pyproject.toml $old/
(cd $old && { patch -R -p1 < $here/kept_partners.diff || git apply -R $here/kept_partners.diff; }) > $OUT/patch.txt 2>&1
grep -c "self.free_share() < FREE_MEMORY_FLOOR_SHARE" $old/evalkit/schedule/kept_problems.py \
  evalkit/schedule/kept_problems.py >> $OUT/patch.txt
run ${PREFIX:-b}_cold $PWD 4 1 170 "--judges 1 --timing-trials 10"
for name in ${SEQUENCE:-new old new}; do
  [ $SECONDS -lt ${LAST_START_S:-430} ] || break
  root=$PWD; [ $name = old ] && root=$old
  run ${PREFIX:-b}_${name}$SECONDS $root 4 2 85 "--judges 1 --timing-trials 10"
done
finish_record
