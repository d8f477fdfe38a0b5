#!/usr/bin/env bash
# Call 2, on call 1's machine while warm (its cache): warm steps with and without the overlap, alternated, each a new
# server, one step each.
source "$(dirname "$0")/steps.sh"
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt
run overlap1 1 90 "--overlap"
run alone2 1 90 "--no-overlap" overlap1
if [ $SECONDS -lt 400 ]; then run overlap2 1 90 "--overlap" alone2; fi
finish_record
