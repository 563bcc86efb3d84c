#!/usr/bin/env bash
# Same-call A/B of the CUDA kernels alone: the built tree as it is ("head")
# against a copy of it whose kernels/ come from another commit ("base").
# The kernels compile at run time, so the copy needs no build of its own.
#
# On the development machine (the GPU machine's copy of .git may be stale):
#   bash tools/ab_kernels.sh prepare 301f2ce          # writes .gpu/base_kernels/
# On the GPU machine, after building the tree:
#   bash tools/ab_kernels.sh run 2 tools/profile_launch.py --reps 50 --cases sparse:600:500000
#
# run ROUNDS SCRIPT ARGS...: runs SCRIPT in head, then in base, ROUNDS times,
# each with --json $OUT/<name>_<round>.json; base imports its own copy of
# the package (PYTHONPATH), whose kernel_text() reads the copy's kernels/.
set -uo pipefail
cmd="${1:?usage: ab_kernels.sh prepare REV | run ROUNDS SCRIPT [ARGS...]}"; shift
root="$(pwd)"
case "$cmd" in
prepare)
    rev="${1:?prepare needs a commit}"
    mkdir -p .gpu/base_kernels
    rm -f .gpu/base_kernels/*
    for f in $(git ls-tree --name-only "$rev" kernels/); do
        git show "$rev:$f" > ".gpu/base_kernels/$(basename "$f")"
    done
    echo "$rev" > .gpu/base_kernels/COMMIT
    ls .gpu/base_kernels
    ;;
run)
    rounds="${1:?run needs ROUNDS}"; script="${2:?run needs a script}"; shift 2
    out="${OUT:-/tmp/paralingam-ab}"
    mkdir -p "$out"
    [ -s .gpu/base_kernels/COMMIT ] || { echo "no .gpu/base_kernels: run 'prepare REV' first" >&2; exit 2; }
    rm -rf /tmp/ab-kernels-base && mkdir -p /tmp/ab-kernels-base
    tar -C "$root" --exclude=./.git --exclude=./.venv --exclude=./build -cf - . \
        | tar -C /tmp/ab-kernels-base -xf -  # (.gpu comes along: setup and data)
    find .gpu/base_kernels -maxdepth 1 -type f ! -name COMMIT -exec cp {} /tmp/ab-kernels-base/kernels/ \;
    (cd /tmp/ab-kernels-base && PYTHONPATH="/tmp/ab-kernels-base${PYTHONPATH:+:$PYTHONPATH}" python3 -c \
        "import paralingam; print('base: kernels of', open('.gpu/base_kernels/COMMIT').read().strip(), 'from', paralingam.__file__)")
    for round in $(seq 1 "$rounds"); do
        echo "== head (round $round)"
        python3 "$script" "$@" --json "$out/head_$round.json"
        echo "== base (round $round)"
        (cd /tmp/ab-kernels-base && PYTHONPATH="/tmp/ab-kernels-base${PYTHONPATH:+:$PYTHONPATH}" \
            python3 "$script" "$@" --json "$out/base_$round.json")
    done
    ;;
*)
    echo "usage: ab_kernels.sh prepare REV | run ROUNDS SCRIPT [ARGS...]" >&2
    exit 2
    ;;
esac
