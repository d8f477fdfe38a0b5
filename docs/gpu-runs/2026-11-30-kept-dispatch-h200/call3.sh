#!/usr/bin/env bash
# Call 3, on the machine call 2 left warm: this tree again, two judges on a new server, three steps (its figures
# again, after the tree before ran).
bash "$(dirname "$0")/warm_run.sh" new_j2_b $PWD 2
