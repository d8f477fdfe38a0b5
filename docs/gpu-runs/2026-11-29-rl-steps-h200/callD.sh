#!/usr/bin/env bash
# Call D (issue 43): on the machine call C left warm (its cache still there), one more warm step at groups of 4 with
# one judge, for a spread of the warm step; its speedups set beside call C's (--against).
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
timeout 165 python3 benchmarks/rl_step.py --device cuda --answers /tmp/ans --cache /tmp/rlcache --group 4 --steps 1 \
  --extra "--judges 1" --json $OUT/judges1_g4_again.json --against "$AGAINST"  # call C's judges1_g4.json, left in the warm machine's $OUT
