#!/usr/bin/env bash
# One call on a machine with two or more GPUs (NVLink): build, the multi-GPU
# tests, then the multi-GPU benchmark (one GPU against all, same run, with
# the one-GPU phase split and the Amdahl bound it implies):
# p=2000 n=8192 (3 repeats, spread bounds 1e7 and 1e8), then p=5000 n=4096
# (1 repeat, the package's spread bound).
#
#   PARALINGAM_COMMIT=$(git rev-parse --short HEAD) bash tools/multi_gpu_check.sh [quick]
#
# Each step has a time limit (build 200 s, tests 150 s, the benchmark 400 s,
# quick: 120 s; about 8 minutes in all when nothing hangs), so a hang cannot
# take the whole call; quick: the benchmark's smoke case only.
# Logs and JSON go to $OUT (the device tool
# brings them back).
set -uo pipefail
mode="${1:-full}"
out="${OUT:-/tmp/paralingam-out}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0  # (no NVLink multicast anywhere; the search uses none)
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$out/gpu.txt"
nvidia-smi topo -m 2>&1 | tee -a "$out/gpu.txt"
if [ -n "${PARALINGAM_COMMIT:-}" ]; then
    echo "commit $PARALINGAM_COMMIT" | tee -a "$out/gpu.txt"
else
    git log -1 --format='commit %H %s (from the device copy of .git: may be stale)' 2>/dev/null \
        | tee -a "$out/gpu.txt"
fi
# one CPU build for this machine (the CPU code is not what is measured here)
SECONDS=0
PARALINGAM_NATIVE=1 timeout 200 python3 -m pip install -q --no-build-isolation --no-deps -e . \
    > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build ${SECONDS} s"
timeout 150 python3 -m pytest -v -rfE --timeout 60 -m gpu tests/test_multi_gpu.py -p no:cacheprovider 2>&1 \
    | tee "$out/multi_gpu_tests.log" | tail -25
status=${PIPESTATUS[0]}
echo "tests done at ${SECONDS} s"
if [ "$mode" = "quick" ]; then
    timeout 120 python3 benchmarks/bench_multi_gpu.py --quick --json "$out/bench_multi_gpu_quick.json" 2>&1 \
        | tee "$out/bench_multi_gpu.log" | tail -12
else
    # p=2000 n=8192 first, then p=5000 n=4096 (the JSON is written after each
    # case; one process, so the second case needs no warm-up fits)
    timeout 400 python3 benchmarks/bench_multi_gpu.py --sizes 2000x8192 5000x4096 --case-repeats 3 1 \
        --spread-work 1e7 --json "$out/bench_multi_gpu.json" 2>&1 | tee "$out/bench_multi_gpu.log" | tail -16
    echo "benchmark done at ${SECONDS} s"
fi
exit $status
