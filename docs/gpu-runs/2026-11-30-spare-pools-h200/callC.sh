#!/usr/bin/env bash
# Call C, the same machine right after call B, on its cache: with 4 profilers, 4 answer spares against 3 (a few
# answers still waited 0.3-1.6 s for their worker with 3), each a new server and two steps.
source "$(dirname "$0")/pools.sh"
larger_pools 4 4; run c_spares4 $PWD 4 2 85 "--judges 1 --timing-trials 10"
larger_pools 3 4; [ $SECONDS -lt 240 ] && run c_spares3 $PWD 4 2 85 "--judges 1 --timing-trials 10"
larger_pools 4 4; [ $SECONDS -lt 400 ] && run c_spares4b $PWD 4 2 85 "--judges 1 --timing-trials 10"
default_pools
finish_record
