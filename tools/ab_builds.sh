#!/usr/bin/env bash
# A/B timing of several builds of paralingam in one call on the GPU machine.
#
#   source .gpu/setup.sh && BUILDS="head:HEAD tree:." bash tools/ab_builds.sh
#
# BUILDS: space-separated name:source pairs; a source is "." (this working
# tree), a .tar of a source tree, or a git commit of this repository. Each
# build is installed into its own folder; the cases then run alternately
# (each build once per case, ROUNDS times) so that clock and thermal drift
# fall on all builds alike. CASES: ";"-separated arguments of
# benchmarks/fit_case.py (default: the cases of the H100 A/Bs in docs/design/gpu_search.rst).
# REPEATS: fits per process (the median is printed). AB_KEEP=1: keep the
# builds of an earlier run in $AB_DIR (same names) instead of building again.
set -uo pipefail
BUILDS="${BUILDS:?name:source pairs}"
CASES="${CASES:-100 1024;500 1024;500 4096;1000 2048;1000 8192;ecoli}"
REPEATS="${REPEATS:-5}"
ROUNDS="${ROUNDS:-2}"
root="$(pwd)"
work="${AB_DIR:-/tmp/paralingam-ab}"
[ "${AB_KEEP:-0}" = 1 ] || rm -rf "$work"
mkdir -p "$work"
names=()
for spec in $BUILDS; do  # sources, then the builds side by side
    name="${spec%%:*}" src="${spec#*:}"
    names+=("$name")
    [ "${AB_KEEP:-0}" = 1 ] && [ -f "$work/$name/site/paralingam/__init__.py" ] && continue
    mkdir -p "$work/$name/src"
    if [ "$src" = "." ]; then
        tar -C "$root" --exclude=.git --exclude=.gpu --exclude=build --exclude='*.so' -cf - . | tar -C "$work/$name/src" -xf -
    elif [ -f "$src" ]; then
        tar -C "$work/$name/src" -xf "$src"
    else
        git -C "$root" archive "$src" | tar -C "$work/$name/src" -xf - || exit 1
    fi
    python3 -m pip install -q --no-build-isolation --no-deps --target "$work/$name/site" \
        "$work/$name/src" > "$work/$name/build.log" 2>&1 &
done
wait
for name in "${names[@]}"; do
    [ -f "$work/$name/site/paralingam/__init__.py" ] || { tail -20 "$work/$name/build.log"; exit 1; }
    # (from $work: the working directory must not shadow the build's package)
    echo "$name imports $(cd "$work" && PYTHONPATH="$work/$name/site${PYTHONPATH:+:$PYTHONPATH}" python3 -c 'import paralingam; print(paralingam.__file__)')"
done
IFS=';' read -ra cases <<< "$CASES"
for _ in $(seq "$ROUNDS"); do
    for case in "${cases[@]}"; do
        for name in "${names[@]}"; do
            # shellcheck disable=SC2086
            (cd "$work" && PYTHONPATH="$work/$name/site${PYTHONPATH:+:$PYTHONPATH}" timeout 300 python3 "$root/benchmarks/fit_case.py" $case \
                --repeats "$REPEATS") \
                2>&1 | sed "s/^/$name: /"
        done
    done
done
