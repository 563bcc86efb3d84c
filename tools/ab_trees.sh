#!/usr/bin/env bash
# Same-machine A/B of two built source trees (e.g. a commit's export and the
# working tree) through one benchmark script, alternated round by round so
# that both see the same load; compare the medians across rounds.
#
#   git archive BASE | tar -x -C /tmp/ab-base && (cd /tmp/ab-base && python setup.py -q build_ext --inplace)
#   bash tools/ab_trees.sh /tmp/ab-base . 4 benchmarks/bench_cpu.py --sizes 30x1024 --no-lingam
#
# Each run writes $OUT/<tree name>_<round>.json (OUT default /tmp/paralingam-ab).
set -uo pipefail
a="$(cd "$1" && pwd)"; b="$(cd "$2" && pwd)"; rounds="$3"; script="$4"; shift 4
out="${OUT:-/tmp/paralingam-ab}"
mkdir -p "$out"
py="${PYTHON:-python3}"
for round in $(seq 1 "$rounds"); do
    for tree in "$a" "$b"; do
        name="$(basename "$tree")"
        echo "== $name (round $round)"
        (cd "$tree" && PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" "$py" "$script" "$@" --json "$out/${name}_$round.json") 2>&1 | tail -n 4
    done
done
