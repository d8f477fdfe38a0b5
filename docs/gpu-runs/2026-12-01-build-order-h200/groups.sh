#!/usr/bin/env bash
# Issue 43, item 5: one judge at --timing-trials 10 on groups of 8 and of 16, this tree, on the cache call 1 left
# (CACHE), a new server each: group 8 two steps (warm cache, then warm server), group 16 one step.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
cache=${CACHE:-/tmp/rlcache_old399}
run g8 $PWD 8 2 120 "--judges 1 --timing-trials 10"
run g16 $PWD 16 1 240 "--judges 1 --timing-trials 10"
finish_record
