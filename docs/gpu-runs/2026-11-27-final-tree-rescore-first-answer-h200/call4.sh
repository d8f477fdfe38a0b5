#!/usr/bin/env bash
# One H200, final tree: the seeds cold then rescored 3 times (issue 29: 10 s); a new Evaluator's first answer
# after 20 s idle (a trainer loading its model) against warm ones (issue 30).
set -u
el() { python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$1"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv; nproc; } > $OUT/call4_host.txt 2>&1
s=$(date +%s.%N); python3 -m evalkit score submissions/ --out /tmp/r0 -q > $OUT/call4_seeds.log 2>&1; echo "seeds cold: rc $? wall $(el $s) s" >> $OUT/call4_seeds.log
for n in 1 2 3; do s=$(date +%s.%N); python3 -m evalkit score submissions/ --out /tmp/r$n -q >> $OUT/call4_seeds.log 2>&1; echo "rescore $n: rc $? wall $(el $s) s" >> $OUT/call4_seeds.log; done
s=$(date +%s.%N); python3 -m evalkit -v score submissions/ --out /tmp/r4 > $OUT/call4_rescore_verbose.log 2> $OUT/call4_rescore_verbose.err; echo "rescore 4 (-v): rc $? wall $(el $s) s" >> $OUT/call4_seeds.log
grep -v cgroup $OUT/call4_rescore_verbose.err > $OUT/call4_rescore_timeline.txt; rm $OUT/call4_rescore_verbose.err
timeout -k 5 200 python3 benchmarks/first_answer.py --device cuda --problems problems --problem alexnet_conv1 --answer .gpu/plain_alexnet.py --answers 4 --idle 20 --log > $OUT/call4_first_answer.log 2>&1; echo "first_answer rc $?" >> $OUT/call4_first_answer.log
