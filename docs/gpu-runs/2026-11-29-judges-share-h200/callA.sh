#!/usr/bin/env bash
# Call A (issue 43, item 1): two judges on one GPU, now that each answer holds its share of the GPU's memory
# (e5036a2) and a sandboxed reference's float64 outputs are read in place (f6d98da): rl_step at groups of 4, cold then
# warm on the same server. Then one judge with --timing-precision 0.03 on the warm cache (a new server), its
# speedups set beside the two-judge run's. The GPU's memory is sampled every 2 s beside it.
source "$(dirname "$0")/rl_steps.sh"
rl judges2_g4 4 2 "--judges 2" 330
rl judges1_p03_g4 4 1 "--judges 1 --timing-precision 0.03" 170 judges2_g4
finish
