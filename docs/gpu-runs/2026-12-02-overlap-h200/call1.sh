#!/usr/bin/env bash
# Issue 43: a GPU's one judge overlapping answers (evalkit/schedule/overlap.py): benchmarks/rl_step.py at group 8, one
# judge, --timing-trials 10: a cold step (a new, empty cache; overlap on, the default), then on that cache a new server
# with the overlap ("overlap", two steps) and one with --no-overlap ("alone", two steps).
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
cache=/tmp/rlcache_overlap
run cold $PWD 8 1 200 "--judges 1 --timing-trials 10 --overlap"
run overlap $PWD 8 2 100 "--judges 1 --timing-trials 10 --overlap"
run alone $PWD 8 2 100 "--judges 1 --timing-trials 10 --no-overlap"
finish_record
