#!/usr/bin/env bash
# What this record's calls share: `source` it from the repository root. The runs themselves (`run`, `finish_record`)
# are ../2026-11-30-two-judges-groups-h200/steps.sh's. `larger_pools` starts more workers ahead in the server's judge
# (one judge: it runs in the server's process), through a sitecustomize module on the server's PYTHONPATH (the
# sandboxes' workers get a path of their own); `default_pools` removes it.
source "$(dirname "${BASH_SOURCE[0]}")/../2026-11-30-two-judges-groups-h200/steps.sh"
larger_pools() {  # SPARES PROFILERS
  printf 'import evalkit.schedule.device_judge as judge\njudge.SPARE_WORKERS = {"cuda": %s}\njudge.PROFILING_WORKERS = %s\n' \
    "$1" "$2" > /tmp/site/sitecustomize.py
}
default_pools() { rm -f /tmp/site/sitecustomize.py; }
