#!/usr/bin/env bash
# Call A (issue 43, item 1): do more workers started ahead shorten a warm step? A passing answer waited 1-3 s for a
# profiler's worker in 3-5 of a warm step's 11 (its profile 0.45-0.7 s otherwise). A cold step fills the cache; then
# a new server and two steps each, one judge, --timing-trials 10: the default pools (2 answer spares, 2 profilers),
# then 3 spares and 4 profilers.
source "$(dirname "$0")/pools.sh"
run a_cold $PWD 4 1 160 "--judges 1 --timing-trials 10"
default_pools; [ $SECONDS -lt 240 ] && run a_default $PWD 4 2 85 "--judges 1 --timing-trials 10"
larger_pools 3 4; [ $SECONDS -lt 400 ] && run a_larger $PWD 4 2 85 "--judges 1 --timing-trials 10"
default_pools
finish_record
