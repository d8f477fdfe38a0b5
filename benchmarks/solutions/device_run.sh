#!/usr/bin/env bash
# On the GPU machine (after the wheel preamble): bash benchmarks/solutions/device_run.sh STAGE...
# Stages: prebuild (evalkit's build stage for problems/*/solutions, in the background), bench (ctypes bench of the prebuilt variant libraries), sass (instruction counts),
# evalkit (judge problems/*/solutions with --baselines none), evalkit-full (with eager and compile baselines;
# BASELINES_FROM=docs/gpu-runs/2026-11-21-seeds-h100/seeds_baselines.json reuses that run's, as calls 2-4 did).
# VARIANTS="v1 v2 ..." picks the bench variants, MEMBW=1 adds the memory-bandwidth probe.
# Everything worth keeping goes to $OUT. LIMIT_S bounds the whole script (default 400 s).
set -uo pipefail
export EVALKIT_CACHE=/tmp/evalkit-cache PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
START=$(date +%s); LIMIT_S=${LIMIT_S:-400}
left() { echo $((LIMIT_S - ($(date +%s) - START))); }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } | tee "$OUT/env.txt"
for stage in "$@"; do
  echo "=== stage $stage ($(left) s left)"
  case $stage in
    prebuild) python3 benchmarks/solutions/prebuild.py --jobs 8 > "$OUT/prebuild.log" 2>&1 &
      PREBUILD_PID=$! ;;
    bench) { timeout 60 python3 benchmarks/solutions/bench.py selftest
             for v in ${VARIANTS:-conv63_tf32 conv63_tf32_rn conv56_f16 conv56_tf32 convT19_tf32 gn19_cudnn conv67_tf32 conv50_tf32 conv50_tf32_t4}; do
               timeout 90 python3 benchmarks/solutions/bench.py run "$v"; done
             [ -n "${MEMBW:-}" ] && timeout 60 python3 benchmarks/solutions/bench.py membw; } > "$OUT/bench.log" 2>&1
           python3 benchmarks/solutions/bench.py summary ;;
    sass) for f in benchmarks/solutions/build/*.so; do s=$(cuobjdump -sass "$f"); echo "$(basename $f) HMMA=$(grep -c HMMA <<<"$s") LDS=$(grep -c 'LDS' <<<"$s") LDL=$(grep -c 'LDL' <<<"$s") STL=$(grep -c 'STL' <<<"$s")"; done | tee "$OUT/sass.txt" ;;
    evalkit|evalkit-full)
      b=none; [ "$stage" = evalkit-full ] && b=eager,compile
      if [ -n "${PREBUILD_PID:-}" ]; then
        while kill -0 "$PREBUILD_PID" 2>/dev/null && [ "$(left)" -gt 90 ]; do sleep 2; done; cat "$OUT/prebuild.log"
      fi
      # BASELINES_FROM=FILE seeds evalkit's baseline cache (keyed by device, torch, problem hash) instead of timing again
      [ -n "${BASELINES_FROM:-}" ] && mkdir -p /tmp/ev && cp "$BASELINES_FROM" /tmp/ev/baselines.json
      timeout "$(left)" python3 -m evalkit score problems/ --out /tmp/ev --jobs 8 --baselines $b ${EVALKIT_ARGS:-} 2>&1 \
        | tr '\r' '\n' | grep -v '^evalkit' > "$OUT/evalkit.log"; tail -30 "$OUT/evalkit.log"
      cp /tmp/ev/results.jsonl /tmp/ev/baselines.json "$OUT/" 2>/dev/null
      python3 - <<'PY'
import json
for line in open("/tmp/ev/results.jsonl"):
    r = json.loads(line); t = r.get("timing") or {}; c = r.get("correctness") or {}
    print(r["problem"][:34], r["sample"][:28], r["verdict"], round(t.get("median_ms") or 0, 3), r.get("speedup_vs_eager"),
          r.get("speedup_vs_compile"), c.get("max_abs_err"), c.get("rel_l2_err"), r.get("flags"), (r.get("reason") or "")[:300])
PY
      ;;
  esac
done
