#!/usr/bin/env bash
# Call 2, on the machine call 1 left warm: the tree before (23bc37e, carried as old/), two judges on a new server,
# three steps, as call 1's.
bash "$(dirname "$0")/warm_run.sh" old_j2 $PWD/old 2
