#!/usr/bin/env bash
# Call B, the same machine right after call A, on its cache: the two settings again, the other way round, and the
# larger pools once more, each a new server and two steps.
source "$(dirname "$0")/pools.sh"
larger_pools 3 4; run b_larger $PWD 4 2 85 "--judges 1 --timing-trials 10"
default_pools; [ $SECONDS -lt 240 ] && run b_default $PWD 4 2 85 "--judges 1 --timing-trials 10"
larger_pools 3 4; [ $SECONDS -lt 400 ] && run b_larger2 $PWD 4 2 85 "--judges 1 --timing-trials 10"
default_pools
finish_record
