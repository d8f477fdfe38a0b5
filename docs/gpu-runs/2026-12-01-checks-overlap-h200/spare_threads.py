"""Call D: a judge's spare worker with CUDA started ahead (as every GPU judge's is) has threads besides its first;
started on 16 cores, are all of them on the judge's two once it is taken? Prints each thread's cores before and
after `SpareWorker.take`. `python3 spare_threads.py` from the repository root, on a GPU machine."""
import os
import time
import uuid
from collections import Counter

from evalkit.sandbox.launcher import Limits
from evalkit.sandbox.protocol import PRELOAD_CUDA_VARIABLE
from evalkit.sandbox.spare import SpareWorker, discard


def threads(pid: int) -> Counter:
    return Counter(tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir(f"/proc/{pid}/task"))


def main() -> None:
    everything = tuple(sorted(os.sched_getaffinity(0)))
    spares = SpareWorker(Limits(group=f"spare-threads-{uuid.uuid4().hex[:8]}", cpus=everything[:2]),
                         {PRELOAD_CUDA_VARIABLE: "1"}, count=1, start_cpus=everything)
    try:
        discard(spares.take(None))
        waiting = spares._spares[0]
        time.sleep(15)  # its CUDA start: the driver's threads
        print("waiting spare: threads by cores", dict(threads(waiting.pid)))
        taken = spares.take(None)
        print("taken: threads by cores", dict(threads(taken.pid)))
        discard(taken)
    finally:
        spares.close()


if __name__ == "__main__":
    main()
