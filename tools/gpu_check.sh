#!/usr/bin/env bash
# One call on the GPU machine: build, GPU tests, launch profile, benchmarks.
#
#   source .gpu/setup.sh && bash tools/gpu_check.sh [tests|bench|quick|full|estimator|ab|pipeline] [pytest -k expr]
#
# tests: build + every GPU-marked test; bench: build + profile + quick benchmark;
# quick: tests + profile + quick benchmark; full: tests + profile + the whole
# grid with lingam/culingam side by side + the estimator benchmarks;
# estimator: tests + the estimator benchmarks (adjacency step against the CUDA
# search, bootstrap on CUDA); ab: the GPU grid and E. coli, this tree against
# the tar of the base commit in $AB_BASE (default .gpu/base.tar; make it with
# `git archive 0cb7114 > .gpu/base.tar`), with tools/ab_builds.sh, then the
# CPU backend's cases the same way (plus this tree built native); pipeline:
# benchmarks/bench_pipeline.py on the CUDA backend (the issue-21 cases but the
# wide ones); wide: wide_5000 and wide_10000, without warm-up fit or estimator.
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
if [ "$mode" != "ab" ]; then  # (ab installs each build it compares on its own)
    python3 -m pip install -q --no-build-isolation --no-deps -e . > "$out/build.log" 2>&1 \
        || { tail -30 "$out/build.log"; exit 1; }
fi
status=0
if [ "$mode" != "bench" ] && [ "$mode" != "ab" ] && [ "$mode" != "pipeline" ] && [ "$mode" != "wide" ]; then
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
if [ "$mode" = "ab" ]; then
    # AB_MORE: more name:source builds between base and head (e.g. "prev:.gpu/prev.tar ")
    BUILDS="base:${AB_BASE:-.gpu/base.tar} ${AB_MORE:-}head:." ROUNDS="${ROUNDS:-2}" REPEATS="${REPEATS:-5}" \
        timeout 400 bash tools/ab_builds.sh 2>&1 | tee "$out/ab_grid.log" | grep -v Warning | tail -40
    # The CPU backend: the default builds (0cb7114's is -march=native, later
    # trees' portable with run-time dispatch) and this tree built native.
    # (native alone first: with AB_KEEP=1 the next step builds none, so
    # neither base nor head can come out native by mistake)
    AB_KEEP=1 PARALINGAM_NATIVE=1 BUILDS="native:." ROUNDS=0 timeout 150 bash tools/ab_builds.sh \
        > "$out/ab_native_build.log" 2>&1
    AB_KEEP=1 BUILDS="base:${AB_BASE:-.gpu/base.tar} head:. native:." ROUNDS=2 REPEATS=7 \
        CASES="30 1024 --backend cpu;100 1024 --backend cpu;200 2048 --backend cpu" \
        timeout 170 bash tools/ab_builds.sh 2>&1 | tee "$out/ab_cpu.log" | grep -v Warning | tail -20
elif [ "$mode" = "pipeline" ]; then
    timeout 220 python3 benchmarks/bench_pipeline.py --backends cuda --repeats 3 --data-dir .gpu/data \
        --cases first_fit_cold first_fit typical ecoli sachs_p_values rank_deficient_300 \
        rank_deficient_1000 --json "$out/bench_pipeline_cuda.json" 2>&1 \
        | tee "$out/bench_pipeline.log" | tail -30
    timeout 150 python3 benchmarks/bench_pipeline.py --backends cuda --repeats 1 --cases tall \
        --json "$out/bench_pipeline_tall.json" 2>&1 | tee "$out/bench_pipeline_tall.log" | tail -6
elif [ "$mode" = "wide" ]; then
    : # below
elif [ "$mode" = "estimator" ]; then
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
if [ "$mode" = "wide" ]; then  # one search of about 80 s each
    for case in wide_5000 wide_10000; do
        timeout "$([ "$case" = wide_5000 ] && echo 200 || echo 380)" python3 benchmarks/bench_pipeline.py --backends cuda --repeats 1 --no-warm-up \
            --no-estimator --cases "$case" --json "$out/bench_pipeline_$case.json" 2>&1 \
            | tee "$out/bench_pipeline_$case.log" | tail -6
    done
fi
exit $status
