#!/usr/bin/env bash
# Call 1: the cold step (an empty cache: every answer of the group builds), the overlap on; then, while the call's
# 600 s allow, a warm step without the overlap on that cache.
source "$(dirname "$0")/steps.sh"
rm -rf $cache /tmp/gpu_memory_all.txt /tmp/serve.txt
run cold 1 420 "--overlap"
if [ $SECONDS -lt 420 ]; then run alone1 1 90 "--no-overlap"; fi
finish_record
