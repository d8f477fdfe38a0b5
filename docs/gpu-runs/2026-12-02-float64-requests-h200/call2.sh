#!/usr/bin/env bash
# Issue 43: the one-pass comparison of a passing output (evalkit/judge/fused_check.py) on the H200: its CUDA tests,
# float64_costs.py on the two largest problems, then benchmarks/rl_step.py at group 8 (one judge, --timing-trials 10):
# a cold step with it (a new, empty cache), then on that cache a new server of this tree ("new", two steps) and one of
# a copy with the one pass switched off ("old": FUSED_MIN_ELEMENTS out of reach, so every comparison takes PyTorch's
# chunked operations, as before), two steps.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
python3 -m pytest -q -m cuda tests/judge/test_fused_check.py -p no:cacheprovider -rA > $OUT/cuda_tests.txt 2>&1
python3 benchmarks/float64_costs.py problems/conv2d_square_input_square_kernel problems/convtranspose2d_gelu_groupnorm \
  --calls 5 --json $OUT/float64_fused.json > $OUT/float64_fused.txt 2>&1
old=/tmp/oldtree; rm -rf $old; mkdir -p $old; cp -r evalkit benchmarks problems pyproject.toml $old/
sed -i 's/^FUSED_MIN_ELEMENTS = 1 << 22 /FUSED_MIN_ELEMENTS = 1 << 62 /' $old/evalkit/judge/fused_check.py
grep -c "^FUSED_MIN_ELEMENTS = 1 << 62" $old/evalkit/judge/fused_check.py >> $OUT/cuda_tests.txt
cache=/tmp/rlcache_fused
run cold $PWD 8 1 200 "--judges 1 --timing-trials 10"
run new $PWD 8 2 110 "--judges 1 --timing-trials 10"
run old $old 8 2 110 "--judges 1 --timing-trials 10"
finish_record
