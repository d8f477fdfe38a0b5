#!/usr/bin/env bash
# One H200: the seeds cold then rescored 3 times (issue 29: 10 s), one with -v for where the time goes; a new
# Evaluator's first answer against warm ones on the GPU (issue 30).
set -u
el() { python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$1"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv; nproc; } > $OUT/call3_host.txt 2>&1
s=$(date +%s.%N); python3 -m evalkit score submissions/ --out /tmp/r0 -q > $OUT/call3_seeds.log 2>&1; echo "seeds cold: rc $? wall $(el $s) s" >> $OUT/call3_seeds.log
for n in 1 2 3; do s=$(date +%s.%N); python3 -m evalkit score submissions/ --out /tmp/r$n -q >> $OUT/call3_seeds.log 2>&1; echo "rescore $n: rc $? wall $(el $s) s" >> $OUT/call3_seeds.log; done
cp /tmp/r3/summary.json $OUT/call3_rescore_summary.json; cp /tmp/r3/results.jsonl $OUT/call3_rescore_results.jsonl
s=$(date +%s.%N); python3 -X importtime -m evalkit -v score submissions/ --out /tmp/r4 > $OUT/call3_rescore_verbose.log 2> $OUT/call3_rescore_verbose.err; echo "rescore 4 (-v, importtime): rc $? wall $(el $s) s" >> $OUT/call3_seeds.log
s=$(date +%s.%N); python3 -c "import torch; torch.cuda.init(); print(torch.cuda.get_device_name())" >> $OUT/call3_seeds.log 2>&1; echo "python + torch + cuda init: $(el $s) s" >> $OUT/call3_seeds.log
timeout -k 5 240 python3 benchmarks/first_answer.py --device cuda --problems problems --problem alexnet_conv1 --answer .gpu/plain_alexnet.py --answers 4 --log > $OUT/call3_first_answer.log 2>&1; echo "first_answer rc $?" >> $OUT/call3_first_answer.log
