#!/usr/bin/env bash
# Call 4, on the machine call 3 left warm: this tree, one judge on a new server, three steps (one judge beside the
# two judges of calls 1-3, on one machine).
bash "$(dirname "$0")/warm_run.sh" new_j1 $PWD 1
