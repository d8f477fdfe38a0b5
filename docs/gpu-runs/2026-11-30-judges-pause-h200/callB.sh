#!/usr/bin/env bash
# Call B (issue 43, item 1): one judge, before and after a kept problem keeps its live baseline (its start was an
# eighth of a warm step's judging). rl_step, groups of 4, `--judges 1 --timing-trials 30`, three steps on one server:
# this tree from an empty cache (cold, then two warm steps); then the tree before (`old/`, a `git archive` of
# c2893c6 carried beside the tree) on that cache, a new server, three steps.
source "$(dirname "$0")/run_steps.sh"
STACKS_AT_S=600  # no stacks asked for
run after_j1_g4 $PWD 4 3 "--judges 1 --timing-trials 30"
run before_j1_g4 $PWD/old 4 3 "--judges 1 --timing-trials 30"
finish
mv $OUT/steps.log $OUT/steps.txt
