#!/usr/bin/env bash
# CPU benchmark of two builds of the CPU backend in one call (e.g. on the GPU
# machine's idle cores): the working tree as is ("head") and with extra
# compile flags for paralingam.search._cpu ("flags", default the 512-bit vector
# preference), alternated, each through benchmarks/bench_cpu.py.
#
#   bash tools/ab_cpu_builds.sh "-mprefer-vector-width=512" --sizes 30x1024 100x1024 --no-lingam
set -uo pipefail
extra="${1:--mprefer-vector-width=512}"; shift || true
out="${OUT:-/tmp/paralingam-out}"
mkdir -p "$out"
root="$(pwd)"
for name in head flags; do
    rm -rf "/tmp/ab-$name" && mkdir -p "/tmp/ab-$name"
    cp -r "$root/setup.py" "$root/README.md" "$root/paralingam" "$root/kernels" "$root/tools" "/tmp/ab-$name/"
    find "/tmp/ab-$name/paralingam" -name "*.so" -delete
done
sed -i "/^cpu_flags =/s|\\[\"-march=native\"\\])|[\"-march=native\", \"$extra\"])|" /tmp/ab-flags/setup.py
grep -n "cpu_flags =" /tmp/ab-flags/setup.py
for name in head flags; do
    (cd "/tmp/ab-$name" && python3 setup.py -q build_ext --inplace > "$out/build_$name.log" 2>&1) \
        || { tail -20 "$out/build_$name.log"; exit 1; }
done
for round in 1 2; do
    for name in head flags; do
        echo "== $name (round $round)"
        (cd "/tmp/ab-$name" && PYTHONPATH="/tmp/ab-$name${PYTHONPATH:+:$PYTHONPATH}" python3 benchmarks/bench_cpu.py "$@" \
            --json "$out/bench_cpu_${name}_$round.json") 2>&1 | tail -n +2 | tee -a "$out/ab_cpu.log"
    done
done
