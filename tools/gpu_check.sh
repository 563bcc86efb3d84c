#!/usr/bin/env bash
# One call on the GPU machine: build, GPU tests, launch profile, benchmarks.
#
#   source .gpu/setup.sh && bash tools/gpu_check.sh [tests|bench|quick|full|estimator] [pytest -k expr]
#
# tests: build + every GPU-marked test; bench: build + profile + quick benchmark;
# quick: tests + profile + quick benchmark; full: tests + profile + the whole
# grid with lingam/culingam side by side + the estimator benchmarks;
# estimator: tests + the estimator benchmarks (adjacency step against the CUDA
# search, bootstrap on CUDA).
# Each step has a time limit, so a hang cannot take the whole call. Logs and
# JSON go to $OUT (the device tool brings them back). The full E. coli sample
# is read from .gpu/data/ (copy ../shared/data/*.npz there first).
set -uo pipefail
mode="${1:-quick}"
kexpr="${2:-}"
out="${OUT:-/tmp/paralingam-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/gpu.txt"
# the device's copy of .git can lag the working tree: pass PARALINGAM_COMMIT
# (e.g. "$(git rev-parse --short HEAD)" taken on the host) to record the truth
if [ -n "${PARALINGAM_COMMIT:-}" ]; then
    echo "commit $PARALINGAM_COMMIT" | tee -a "$out/gpu.txt"
else
    git log -1 --format='commit %H %s (from the device copy of .git: may be stale)' 2>/dev/null \
        | tee -a "$out/gpu.txt"
fi
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
status=0
if [ "$mode" != "bench" ]; then
    timeout 420 python3 -m pytest -q -m gpu tests/ ${kexpr:+-k "$kexpr"} -p no:cacheprovider 2>&1 \
        | tee "$out/gpu_tests.log" | tail -25
    status=${PIPESTATUS[0]}
fi
estimator_benchmarks() {
    timeout 300 python3 benchmarks/bench_adjacency.py --backend cuda --sizes 100x1024 500x4096 1000x8192 \
        --lingam-sizes 100x1024 --json "$out/bench_adjacency_cuda.json" 2>&1 \
        | tee "$out/bench_adjacency_cuda.log" | tail -8
    timeout 180 python3 benchmarks/bench_bootstrap.py --backend cuda --json "$out/bench_bootstrap_cuda.json" \
        2>&1 | tee "$out/bench_bootstrap_cuda.log" | tail -20
}
if [ "$mode" = "estimator" ]; then
    estimator_benchmarks
elif [ "$mode" != "tests" ]; then
    timeout 120 python3 tools/profile_launch.py --json "$out/profile.json" 2>&1 | tee "$out/profile.log" | tail -15
    if [ "$mode" = "full" ]; then
        timeout 420 python3 benchmarks/bench_gpu.py --peers 50x1024 --json "$out/bench_gpu.json" 2>&1 \
            | tee "$out/bench_gpu.log" | tail -48
        estimator_benchmarks
    else
        timeout 200 python3 benchmarks/bench_gpu.py --quick ${BENCH_ARGS:-} --json "$out/bench_gpu.json" 2>&1 \
            | tee "$out/bench_gpu.log" | tail -20
    fi
fi
exit $status
