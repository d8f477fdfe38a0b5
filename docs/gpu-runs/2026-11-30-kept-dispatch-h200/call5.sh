#!/usr/bin/env bash
# Call 5, on the machine call 4 left warm: the tree before (23bc37e, carried as old/), one judge on a new server,
# three steps (call 4's run with the tree before).
bash "$(dirname "$0")/warm_run.sh" old_j1 $PWD/old 1
