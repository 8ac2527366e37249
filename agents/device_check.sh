#!/usr/bin/env bash
# One-shot check of the GPU agents on a real NVIDIA machine (about 60 s, at most 120 s):
#   1. nvidia-smi's own view (for comparison),
#   2. ccc_nvml.read_gpus / read_temperatures / read_processes through the real NVML, timed,
#      while a small CUDA context (driver API through ctypes, 256 MiB) runs so that there is a
#      GPU process to see,
#   3. the exporter: --once, then served on 127.0.0.1 and scraped 20 times over HTTP,
#   4. under load (bf16 matmuls through the machine's own torch, when it has one): the exporter again,
#   5. the fan controller with --dry-run on the real temperatures (never runs ipmitool).
# Outputs go to $OUT (default /tmp/ccc-device-check): summary.log, nvidia-smi.txt, nvml.json,
# exposition.txt, scrape.txt.
#
#   bash agents/device_check.sh                 # on the GPU machine, from the repository root
#   bash agents/device_check.sh --make-pylib    # HERE, before: copies the pure-Python packages
#                                               # the agents need into .device-pylib/
#
# The agents import their library (_utils/) from PYTHONPATH, as their systemd units do.
# The GPU machine cannot reach a package index. The script uses, in this order: a python3 that
# already imports pynvml, prometheus_client and yaml; the same with PYTHONPATH=.device-pylib
# (made by --make-pylib; add /.device-pylib/ to .git/info/exclude and carry it); a
# pip install --target into a temporary directory (only works with network access).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PYLIB=$REPO/.device-pylib
PACKAGES="pynvml prometheus_client yaml docker requests urllib3 idna certifi charset_normalizer"

if [[ ${1:-} == --make-pylib ]]; then
    py=${CCC_PYTHON:-$REPO/.venv/bin/python}
    [[ -x $py ]] || py=/tmp/venv/bin/python
    rm -rf "$PYLIB" && mkdir -p "$PYLIB"
    for package in $PACKAGES; do
        path=$("$py" -c "import $package, os; f = $package.__file__; print(os.path.dirname(f) if f.endswith('__init__.py') else f)") ||
            { echo "cannot import $package with $py" >&2; exit 1; }
        cp -r "$path" "$PYLIB/"
    done
    find "$PYLIB" -name __pycache__ -prune -exec rm -rf {} + ; find "$PYLIB" -name '*.so' -delete
    du -sh "$PYLIB"
    exit 0
fi

OUT=${OUT:-/tmp/ccc-device-check}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.log
: >"$SUMMARY"
START=$SECONDS
say() { echo "== [$((SECONDS - START)) s] $*" | tee -a "$SUMMARY"; }
LIB=$REPO/_utils
export PYTHONUNBUFFERED=1 PYTHONPATH=$LIB

say "host $(hostname) kernel $(uname -r); $(nproc) CPUs"
say "nvidia-smi"
{ timeout 15 nvidia-smi -L; timeout 15 nvidia-smi --format=csv \
    --query-gpu=index,uuid,name,temperature.gpu,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,fan.speed,pci.bus_id
} >"$OUT/nvidia-smi.txt" 2>&1
cat "$OUT/nvidia-smi.txt" | tee -a "$SUMMARY" >/dev/null

# --- a Python with the agents' packages. The carried .device-pylib comes first when present: it
# holds the versions the project pins (the GPU machine's own pynvml may be another release).
PY=${CCC_PYTHON:-python3}
imports="import pynvml, prometheus_client, yaml, docker"
if [[ -d $PYLIB ]] && PYTHONPATH=$PYLIB "$PY" -c "$imports" 2>/dev/null; then
    export PYTHONPATH=$LIB:$PYLIB
elif ! "$PY" -c "$imports" 2>/dev/null; then
    target=$(mktemp -d)
    say "pip install --target $target (needs network)"
    timeout 40 "$PY" -m pip install -q --target "$target" nvidia-ml-py prometheus-client pyyaml docker >>"$SUMMARY" 2>&1
    export PYTHONPATH=$LIB:$target
fi
say "python: $("$PY" --version 2>&1) PYTHONPATH=${PYTHONPATH:-}; $("$PY" -c "$imports; print('imports ok:', pynvml.__file__)" 2>&1)"

# --- a GPU process to see: a CUDA context with 256 MiB, through the driver API (no toolkit
# needed). It writes its own PID (the one NVML lists), not the PID of the timeout around it.
cat >"$OUT/.cuda_hold.py" <<'EOF'
import ctypes, os, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(dev), 0)),
                   ("cuCtxCreate_v2", (ctypes.byref(ctx), 0, dev)), ("cuMemAlloc_v2", (ctypes.byref(ptr), 256 << 20))):
    rc = getattr(cuda, call)(*args)
    if rc:
        print(f"cuda_hold: {call} failed with {rc}", flush=True)
        sys.exit(1)
with open(sys.argv[2], "w") as pid_file:
    pid_file.write(str(os.getpid()))
print("cuda_hold: context with 256 MiB up", flush=True)
time.sleep(float(sys.argv[1]))
EOF
rm -f "$OUT/.hold.pid"
timeout 40 "$PY" "$OUT/.cuda_hold.py" 35 "$OUT/.hold.pid" >>"$SUMMARY" 2>&1 &
HOLD_WRAPPER=$!
for _ in $(seq 100); do [[ -s $OUT/.hold.pid ]] && break; sleep 0.1; done
HOLD=$(cat "$OUT/.hold.pid" 2>/dev/null || echo 0)
say "GPU process started: pid $HOLD (python ctypes CUDA context)"

# --- NVML through ccc_nvml
say "ccc_nvml readers"
timeout 30 "$PY" - "$HOLD" >"$OUT/nvml.json" 2>>"$SUMMARY" <<'EOF'
import json, sys, time
import ccc_nvml, ccc_process_owners
hold = int(sys.argv[1])
result = {}
start = time.perf_counter()
try:
    nvml = ccc_nvml.load_nvml()
except ccc_nvml.GpuReadError as exc:
    json.dump({"load_nvml": f"{type(exc).__name__}: {exc}"}, sys.stdout)
    sys.exit(1)
result["load_nvml_ms"] = (time.perf_counter() - start) * 1000
for name in ("read_gpus", "read_temperatures", "read_processes"):
    function = getattr(ccc_nvml, name)
    try:
        result[name] = function(nvml)
        times = []
        for _ in range(10):
            start = time.perf_counter()
            function(nvml)
            times.append((time.perf_counter() - start) * 1000)
        result[name + "_ms_min_median_max"] = [min(times), sorted(times)[5], max(times)]
    except Exception as exc:
        result[name] = f"{type(exc).__name__}: {exc}"
procs = result.get("read_processes")
if isinstance(procs, list):
    result["hold_pid_seen"] = any(p["pid"] == hold for p in procs)
    result["attributed"] = ccc_process_owners.attribute(procs, {})
    result["container_of_pids"] = {p["pid"]: ccc_process_owners.container_of_pid(p["pid"]) for p in procs}
result["self_cgroup"] = open("/proc/self/cgroup").read()
names = [n for n in ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID", "nvmlDeviceGetName",
                     "nvmlDeviceGetMinorNumber", "nvmlDeviceGetTemperature", "nvmlDeviceGetUtilizationRates",
                     "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                     "nvmlDeviceGetFanSpeed", "nvmlDeviceGetPciInfo", "nvmlDeviceGetComputeRunningProcesses",
                     "nvmlDeviceGetGraphicsRunningProcesses")]
result["missing_pynvml_names"] = [n for n in names if not hasattr(nvml, n)]
ccc_nvml.shutdown_nvml(nvml)
json.dump(result, sys.stdout, indent=1, default=str)
EOF
echo "   rc=$?" | tee -a "$SUMMARY"
"$PY" -c "
import json, sys
r = json.load(open(sys.argv[1]))
for key, value in r.items():
    if key not in ('self_cgroup',):
        print('  ', key, '=', json.dumps(value, default=str)[:1500])
" "$OUT/nvml.json" 2>&1 | tee -a "$SUMMARY"

# --- the exporter
say "exporter --once"
timeout 20 "$PY" agents/ccc_gpu_exporter.py --once >"$OUT/exposition.txt" 2>>"$SUMMARY"
echo "   rc=$? (0 = every source succeeded)" | tee -a "$SUMMARY"
grep -E '^(nvidia_gpu_|ccc_gpu_process|ccc_gpu_up|ccc_gpu_exporter)' "$OUT/exposition.txt" | head -60 | tee -a "$SUMMARY"

say "exporter served on 127.0.0.1:19445, 20 scrapes"
printf 'listen_address: 127.0.0.1\nport: 19445\n' >"$OUT/.exporter.yaml"
timeout 40 "$PY" agents/ccc_gpu_exporter.py --config "$OUT/.exporter.yaml" >>"$SUMMARY" 2>&1 &
EXPORTER=$!
timeout 30 "$PY" - >"$OUT/scrape.txt" 2>&1 <<'EOF'
import time, urllib.request
from prometheus_client.parser import text_string_to_metric_families
url = "http://127.0.0.1:19445/nvidia"
for _ in range(100):
    try:
        urllib.request.urlopen(url, timeout=2).read()
        break
    except OSError:
        time.sleep(0.1)
walls, server = [], []
for _ in range(20):
    start = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    walls.append((time.perf_counter() - start) * 1000)
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    server.append(fams["ccc_gpu_exporter_scrape_duration_seconds"].samples[0].value * 1000)
walls.sort(); server.sort()
print(f"HTTP scrape wall ms: p50 {walls[10]:.2f} p95 {walls[18]:.2f} max {walls[-1]:.2f}")
print(f"server-side collection ms: p50 {server[10]:.2f} p95 {server[18]:.2f} max {server[-1]:.2f}")
print("collection_success", fams["ccc_gpu_exporter_collection_success"].samples[0].value,
      "samples", sum(len(f.samples) for f in fams.values()), "bytes", len(body))
EOF
echo "   rc=$?" | tee -a "$SUMMARY"
cat "$OUT/scrape.txt" | tee -a "$SUMMARY"
kill -TERM "$EXPORTER" 2>/dev/null; wait "$EXPORTER" 2>/dev/null
kill "$HOLD_WRAPPER" "$HOLD" 2>/dev/null; wait "$HOLD_WRAPPER" 2>/dev/null
rm -f "$OUT/.cuda_hold.py" "$OUT/.exporter.yaml" "$OUT/.hold.pid"

# --- under load: utilisation and power as NVML reports them while the GPU works (torch, when the
# GPU machine has it on its own python3; the agents' PYTHONPATH is left out for that process)
say "load: 12 s of bf16 matmuls (if torch is there), exporter read at 8 s"
cat >"$OUT/.load.py" <<'EOF'
import sys, time
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
print("load: done", flush=True)
EOF
if env -u PYTHONPATH "$PY" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    env -u PYTHONPATH timeout 30 "$PY" "$OUT/.load.py" 12 >>"$SUMMARY" 2>&1 &
    LOAD=$!
    sleep 8
    timeout 20 "$PY" agents/ccc_gpu_exporter.py --once >"$OUT/exposition-load.txt" 2>>"$SUMMARY"
    grep -E '^(nvidia_gpu_(duty_cycle|power_usage_milliwatts|temperature_celsius|memory_used_bytes)|ccc_gpu_process)' \
        "$OUT/exposition-load.txt" | tee -a "$SUMMARY"
    wait "$LOAD"
else
    say "no torch with CUDA on $PY: load phase skipped"
fi

# --- the fan controller on the real temperatures: --dry-run (never runs ipmitool), 7 s
say "fan controller --dry-run, 7 s"
printf 'interval: 1.0\nwindow: 2\nstate_file: %s/.fan-state.json\n' "$OUT" >"$OUT/.fans.yaml"
timeout -s TERM 7 "$PY" agents/ccc_fan_controller.py --config "$OUT/.fans.yaml" --dry-run --log-level info >>"$SUMMARY" 2>&1
echo "   rc=$? (124: stopped by the timeout's SIGTERM after running)" | tee -a "$SUMMARY"
cat "$OUT/.fan-state.json" 2>/dev/null | head -c 600 | tee -a "$SUMMARY"; echo
rm -f "$OUT/.load.py" "$OUT/.fans.yaml" "$OUT/.fan-state.json"
say "done"
