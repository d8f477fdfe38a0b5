#!/usr/bin/env bash
# Call D, on a fresh machine, this tree: is a warm step bound by the judge's own cores? One judge, its process and
# every worker of its (the answer's, the spares starting, the profilers', the references', the live baseline's) run
# on the judge's 2 cores (evalkit/schedule/placement.py, JUDGE_CORES), the builds on the other 14, idle in a warm step.
# A cold step fills the cache; then one warm-cache step on a new server each: 2 judge cores, 6, then 2 again. The 6
# is set for the server's process alone by a sitecustomize module on its PYTHONPATH (the sandboxes' workers get a
# path of their own). Each run's busy share of the judge's cores and of the rest comes from /proc/stat.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
cpu_busy() {  # NAME FIRST_JUDGE_CORES: /proc/stat's busy share per core since the last call, the judge's and the rest
  python3 - "$1" "$2" <<'PY' >> $OUT/cpu_busy.txt
import json, os, sys
now = {l.split()[0]: [int(x) for x in l.split()[1:]] for l in open("/proc/stat") if l.startswith("cpu") and l[3].isdigit()}
path = "/tmp/cpu_stat.json"
before = json.load(open(path)) if os.path.exists(path) else None
json.dump(now, open(path, "w"))
if before:
    busy = {}
    for cpu, t in now.items():
        d = [a - b for a, b in zip(t, before[cpu])]; total = sum(d) or 1
        busy[int(cpu[3:])] = 1 - (d[3] + d[4]) / total  # idle + iowait
    n = int(sys.argv[2]); judge = [busy[c] for c in sorted(busy)[:n]]; rest = [busy[c] for c in sorted(busy)[n:]]
    print(f"{sys.argv[1]}: judge cores {n}: busy {sum(judge)/len(judge):.0%} ({', '.join(f'{b:.0%}' for b in judge)}); "
          f"the other {len(rest)}: busy {sum(rest)/len(rest):.0%}")
PY
}
run d_cold_j1 $PWD 4 1 160 "--judges 1 --timing-trials 30"
cpu_busy start 2
[ $SECONDS -lt 200 ] && run d_warm_cores2 $PWD 4 1 85 "--judges 1 --timing-trials 30" && cpu_busy d_warm_cores2 2
echo "import evalkit.schedule.placement as placement; placement.JUDGE_CORES = 6" > /tmp/site/sitecustomize.py
[ $SECONDS -lt 290 ] && run d_warm_cores6 $PWD 4 1 85 "--judges 1 --timing-trials 30" && cpu_busy d_warm_cores6 6
rm -f /tmp/site/sitecustomize.py
[ $SECONDS -lt 380 ] && run d_warm_cores2b $PWD 4 1 85 "--judges 1 --timing-trials 30" && cpu_busy d_warm_cores2b 2
finish_record
