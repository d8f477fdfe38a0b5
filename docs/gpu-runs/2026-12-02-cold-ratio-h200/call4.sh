#!/usr/bin/env bash
# Call 4 (the machine of call 3, its wheels installed): the `cuda` tests outside tests/end_to_end.
export PYTHONPATH=/tmp/site:$PWD EVALKIT_CACHE=/tmp/evalkit-cache-tests
timeout 200 python3 -m pytest -q -m cuda tests/judge tests/sandbox tests/schedule -p no:cacheprovider -rA > $OUT/pytest_cuda_units.txt 2>&1
