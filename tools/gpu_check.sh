#!/usr/bin/env bash
# One call on the GPU machine: build, run the GPU tests, profile and benchmark.
#   run: source .gpu/setup.sh && bash tools/gpu_check.sh [quick|full]
set -uo pipefail
mode="${1:-quick}"
out="${OUT:-/tmp/paralingam-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -3
python3 -m pytest -q -m gpu tests/test_gpu.py -x 2>&1 | tee "$out/gpu_tests.log" | tail -15
if [ "$mode" = "full" ]; then
    python3 tools/bench_gpu.py --json "$out/bench_gpu.json" 2>&1 | tee "$out/bench_gpu.log" | tail -40
else
    python3 tools/bench_gpu.py --quick --json "$out/bench_gpu.json" 2>&1 | tee "$out/bench_gpu.log" | tail -40
fi
