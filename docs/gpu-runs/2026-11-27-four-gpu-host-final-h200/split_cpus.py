"""Prints two cpulists (a, b): the host's cores split in halves by physical core (hyperthread siblings together)."""
import os
cpus = sorted(os.sched_getaffinity(0))
groups = {}
for cpu in cpus:
    try:
        with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
            key = f.read().strip()
    except OSError:
        key = str(cpu)
    groups.setdefault(key, []).append(cpu)
ordered = sorted(groups.values())
half = len(ordered) // 2
a = sorted(c for g in ordered[:half] for c in g)
b = sorted(c for g in ordered[half:] for c in g)
print(",".join(map(str, a)), ",".join(map(str, b)))
