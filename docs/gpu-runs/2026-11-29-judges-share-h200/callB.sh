#!/usr/bin/env bash
# Call B (issue 43, item 1): the lever call A pointed at, fewer timed requests (--timing-trials 30), with one judge and
# with two on one GPU: rl_step at groups of 4, cold then warm on the same server with one judge; then two judges on the
# warm cache (a new server, then the same server), their speedups set beside the one-judge run's. The GPU's memory is
# sampled every 2 s beside it.
source "$(dirname "$0")/rl_steps.sh"
rl judges1_t30_g4 4 2 "--judges 1 --timing-trials 30" 300
rl judges2_t30_g4 4 2 "--judges 2 --timing-trials 30" 250 judges1_t30_g4
finish
