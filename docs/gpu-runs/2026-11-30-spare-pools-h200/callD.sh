#!/usr/bin/env bash
# Call D, a fresh machine, the tree with the new pools as its default (3 spares, 4 profilers): what 30 timed requests
# cost against 10 now. A cold step at 10 fills the cache; then a new server and two steps at 30 (its first step times
# the baselines for 30 requests), and a new server and two steps at 10.
source "$(dirname "$0")/pools.sh"
default_pools
run d_cold $PWD 4 1 160 "--judges 1 --timing-trials 10"
[ $SECONDS -lt 200 ] && run d_t30 $PWD 4 2 95 "--judges 1 --timing-trials 30"
[ $SECONDS -lt 360 ] && run d_t10 $PWD 4 2 85 "--judges 1 --timing-trials 10"
finish_record
