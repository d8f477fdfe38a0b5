#!/usr/bin/env bash
# Call 3: the `cuda` tests of the tree, stopped at 420 s so the call ended within the session's device time (-x: the
# first failure or error ends the run).
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD EVALKIT_CACHE=/tmp/evalkit-cache-tests
timeout 420 python3 -m pytest -q -m cuda tests -p no:cacheprovider -rA -x --durations=15 > $OUT/pytest_cuda.txt 2>&1
