"""Does an idle/stopped CUPTI-started process bias another's timing? And how far apart do fresh processes read?"""
import os, signal, subprocess, sys, time, textwrap, statistics
PRE = textwrap.dedent("""
    import time, torch, torch.profiler, statistics, sys, os
    from torch.profiler import profile, ProfilerActivity as A
    conv = torch.nn.Conv2d(3, 96, 11, stride=4, padding=2).cuda(); x = torch.rand(10, 3, 224, 224, device='cuda')
    with torch.no_grad(): conv(x); torch.cuda.synchronize()
    def bench(n=200):
        out=[]
        with torch.no_grad():
            for _ in range(n):
                a=torch.cuda.Event(enable_timing=True); b=torch.cuda.Event(enable_timing=True)
                a.record(); conv(x); b.record(); b.synchronize(); out.append(a.elapsed_time(b))
        return statistics.median(out)
""")
TIMER = PRE + textwrap.dedent("""
    print('ready', flush=True)
    for line in sys.stdin:
        print(f'{bench():.4f}', flush=True)
""")
HOLD = PRE + textwrap.dedent("""
    with profile(activities=[A.CPU, A.CUDA]) as p:
        with torch.no_grad(): conv(x); torch.cuda.synchronize()
    print('ready', flush=True); sys.stdin.readline()
""")
def start(code):
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p
def ask(t):
    t.stdin.write("go\n"); t.stdin.flush(); return float(t.stdout.readline())
t = start(TIMER)
res = {k: [] for k in ("alone", "idle_cupti", "stopped_cupti", "starting_stopped")}
for rnd in range(6):
    res["alone"].append(ask(t))
    h = start(HOLD); res["idle_cupti"].append(ask(t))
    os.kill(h.pid, signal.SIGSTOP); time.sleep(0.2); res["stopped_cupti"].append(ask(t))
    os.kill(h.pid, signal.SIGCONT); h.kill(); h.wait()
    # a holder stopped in the middle of its start (torch imported, CUDA/CUPTI initialising)
    s = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    time.sleep(2.5 + 0.4 * rnd); os.kill(s.pid, signal.SIGSTOP); time.sleep(0.2)
    res["starting_stopped"].append(ask(t))
    os.kill(s.pid, signal.SIGCONT); s.kill(); s.wait()
for k, v in res.items():
    print(f"{k:18s} median {statistics.median(v):.4f}  all {' '.join(f'{x:.4f}' for x in v)}", flush=True)
t.kill()
fresh = []
for i in range(6):
    f = start(TIMER); fresh.append((ask(f), ask(f))); f.kill(); f.wait()
print("fresh processes (two reads each):", " ".join(f"{a:.4f}/{b:.4f}" for a, b in fresh), flush=True)
