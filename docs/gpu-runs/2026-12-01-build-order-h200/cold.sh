#!/usr/bin/env bash
# Issue 43, item 1 (a cold step within 1.3x of its builds): builds that take the CPU oldest first
# (build_order.diff: each build started gets a nice value, and its cgroup the CPU weight, a step below the youngest
# running) against equal shares (the change reversed on a copy). Cold steps, each a new server on a new, empty
# cache (the torch header precompiled, every answer built, every baseline timed), one judge, group 4,
# --timing-trials 10, alternated; SEQUENCE orders them, LAST_START_S is when no further run starts.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
here=$PWD/docs/gpu-runs/2026-12-01-build-order-h200
old=/tmp/oldtree; rm -rf $old; mkdir -p $old; cp -r evalkit benchmarks problems pyproject.toml $old/
(cd $old && patch -R -p1 < $here/build_order.diff) > $OUT/patch.txt 2>&1
grep -c "nice=nice" $old/evalkit/schedule/backend.py evalkit/schedule/backend.py >> $OUT/patch.txt
{ echo "autogroups: $(cat /proc/sys/kernel/sched_autogroup_enabled 2>&1)"; echo "cgroup fs: $(stat -fc %T /sys/fs/cgroup)"
  echo "cgroup v2 controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>&1)"; } >> $OUT/environment.txt
for name in ${SEQUENCE:-new old new old}; do
  [ $SECONDS -lt ${LAST_START_S:-420} ] || break
  root=$PWD; [ $name = old ] && root=$old
  cache=/tmp/rlcache_$name$SECONDS
  run cold_${name}$SECONDS $root 4 1 160 "--judges 1 --timing-trials 10"
done
finish_record
