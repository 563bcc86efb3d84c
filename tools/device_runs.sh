#!/usr/bin/env bash
# The device calls behind the result files of the 2026-11-26 (morning)
# session, one mode each: run on the GPU machine after `source .gpu/setup.sh`,
# with PARALINGAM_COMMIT set to the commit measured ($OUT collects the logs).
# As written here, every build ends before the timed fits start; the
# session's grid-ab call (9fe3248) ran the editable build beside the A/B's
# builds and fits, so it may have overlapped their first fits.
#
#   grid-ab    GPU grid and E. coli: 0cb7114, f073e7d (before the update_cov
#              change), 34a91e7 (larger blocks for every small r) and this
#              tree, alternated (tools/ab_builds.sh); then every GPU test.
#              Needs .gpu/base.tar, .gpu/prev.tar, .gpu/ungated.tar
#              (git archive 0cb7114 / f073e7d / 34a91e7).
#   pipeline   benchmarks/bench_pipeline.py on the CUDA backend: the issue-21
#              cases, tall, and wide_5000.
#   first-cpu  the CPU backend against 0cb7114 (3 rounds), the first-fit
#              cases, then every GPU test.
set -uo pipefail
mode="${1:?grid-ab | pipeline | first-cpu}"
out="${OUT:-/tmp/paralingam-out}"
mkdir -p "$out"
editable() {
    python3 -m pip install -q --no-build-isolation --no-deps -e . > "$out/build.log" 2>&1
    echo "editable rc=$?" >> "$out/build.log"
}
gpu_tests() {
    timeout 250 python3 -m pytest -q -m gpu tests/ -p no:cacheprovider --maxfail=5 2>&1 \
        | tee "$out/gpu_tests.log" | tail -4
}
case "$mode" in
grid-ab)
    # the builds first (the A/B's tar of this tree before the editable build
    # writes into it), then the timed fits with no build beside them
    BUILDS="base:.gpu/base.tar prev:.gpu/prev.tar ungated:.gpu/ungated.tar head:." ROUNDS=0 \
        timeout 250 bash tools/ab_builds.sh > "$out/ab_build.log" 2>&1
    editable
    AB_KEEP=1 BUILDS="base:.gpu/base.tar prev:.gpu/prev.tar ungated:.gpu/ungated.tar head:." \
        ROUNDS=2 REPEATS=7 CASES="100 1024;200 1024;500 1024;1000 8192;ecoli" \
        timeout 300 bash tools/ab_builds.sh > "$out/ab_grid.log" 2>&1
    grep "search" "$out/ab_grid.log"
    gpu_tests
    ;;
pipeline)
    editable || exit 1
    timeout 200 python3 benchmarks/bench_pipeline.py --backends cuda --repeats 3 --data-dir .gpu/data \
        --cases first_fit_cold first_fit typical ecoli sachs_p_values rank_deficient_300 \
        rank_deficient_1000 --json "$out/bench_pipeline_cuda.json" 2>&1 | tail -32
    timeout 90 python3 benchmarks/bench_pipeline.py --backends cuda --repeats 1 --cases tall \
        --json "$out/bench_pipeline_tall.json" 2>&1 | tail -8
    timeout 140 python3 benchmarks/bench_pipeline.py --backends cuda --repeats 1 --no-warm-up \
        --no-estimator --cases wide_5000 --json "$out/bench_pipeline_wide_5000.json" 2>&1 | tail -8
    ;;
first-cpu)
    BUILDS="base:.gpu/base.tar head:." ROUNDS=0 timeout 250 bash tools/ab_builds.sh > "$out/ab_build.log" 2>&1
    editable  # (after the A/B's tar of this tree; no build beside the timed fits)
    AB_KEEP=1 BUILDS="base:.gpu/base.tar head:." ROUNDS=3 REPEATS=9 \
        CASES="30 1024 --backend cpu;100 1024 --backend cpu;200 2048 --backend cpu" \
        timeout 150 bash tools/ab_builds.sh > "$out/ab_cpu.log" 2>&1
    grep "search" "$out/ab_cpu.log"
    timeout 90 python3 benchmarks/bench_pipeline.py --backends cuda --repeats 3 \
        --cases first_fit_cold first_fit --json "$out/bench_pipeline_first.json" 2>&1 | tail -6
    gpu_tests
    ;;
*)
    echo "unknown mode $mode" >&2; exit 2 ;;
esac
