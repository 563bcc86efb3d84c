#!/usr/bin/env bash
# The product kernels must compile to the same machine code as at a
# reference commit, in both variants: the single-GPU build and the
# multi-GPU one (-DPL_PEERS=1). Compares each kernel's .text section (and
# its registers / shared memory / parameter sections) with
# tools/cubin_sections.py and names the kernels that differ; the whole
# cubins are compared too, for information. Needs nvcc, no GPU.
#
#   bash tools/same_single_gpu_cubin.sh [REF] [ARCH]     # default: main sm_90
#
# PYTHON picks the interpreter (default python3; only the standard library
# is used). Exits 1 when any kernel of either variant differs.
set -euo pipefail
ref="${1:-main}"
arch="${2:-sm_90}"
py="${PYTHON:-python3}"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git archive "$ref" kernels | tar -x -C "$tmp"
opts=(-cubin -arch="$arch" -DWARPS=8 -DMIN_BLOCKS=4 -std=c++17 -O3)
status=0
for variant in single peers; do
    extra=()
    [ "$variant" = peers ] && extra=(-DPL_PEERS=1)
    nvcc "${opts[@]}" "${extra[@]}" -o "$tmp/ref_$variant.cubin" "$tmp/kernels/paralingam.cu"
    nvcc "${opts[@]}" "${extra[@]}" -o "$tmp/tree_$variant.cubin" kernels/paralingam.cu
    if "$py" "$here/cubin_sections.py" "$tmp/ref_$variant.cubin" "$tmp/tree_$variant.cubin" \
            --label "$variant $arch"; then
        if cmp -s "$tmp/ref_$variant.cubin" "$tmp/tree_$variant.cubin"; then
            echo "[$variant $arch] whole cubin identical to $ref's"
        else
            echo "[$variant $arch] whole cubin differs from $ref's outside the kernels' code"
        fi
    else
        echo "[$variant $arch] kernels differ from $ref's" >&2
        status=1
    fi
done
exit $status
