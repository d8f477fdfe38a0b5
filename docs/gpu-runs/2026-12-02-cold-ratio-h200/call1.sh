#!/usr/bin/env bash
# Call 1: issue 43's cold step against its builds alone, on one machine in one call (`bash benchmarks/gpu_check.sh
# cold`): benchmarks/builds_alone.py (rl_step.py's answers at group 8, distinct texts, built through evalkit's build
# stage with nothing judged, a cache of its own), then rl_step.py's cold step on an empty cache (one judge,
# --timing-trials 10), cut at 320 s so the call ends within its 600 s.
set -uo pipefail
RL_STEP_LIMIT_S=320 timeout 590 bash benchmarks/gpu_check.sh cold
