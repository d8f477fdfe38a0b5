#!/usr/bin/env bash
# Call B (issue 43, item 1): where a warm judge's time goes, function by function. benchmarks/judge_samples.py judges
# the answers rl_step sends (each problem's curated solutions and seed answer, its reference sent as text) twice
# through one Evaluator with one judge and --timing-trials 30: the first round builds, the second is sampled.
set -uo pipefail
source "$(dirname "$0")/../2026-11-29-judges-share-h200/rl_steps.sh"
timeout 500 python3 benchmarks/judge_samples.py --answers $ans --device cuda --extra-setting timing_trials=30 \
  --rounds 2 --top 70 --cache $cache --json $OUT/judge_samples.json > $OUT/judge_samples.txt 2>&1
kill %1
