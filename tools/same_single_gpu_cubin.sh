#!/usr/bin/env bash
# The single-GPU kernels must compile to the same cubin as at a reference
# commit (the multi-GPU code is compiled only with -DPL_PEERS=1); the
# multi-GPU variant must compile. Needs nvcc, no GPU.
#
#   bash tools/same_single_gpu_cubin.sh [REF] [ARCH]     # default: main sm_90
set -euo pipefail
ref="${1:-main}"
arch="${2:-sm_90}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git archive "$ref" kernels | tar -x -C "$tmp"
opts=(-cubin -arch="$arch" -DWARPS=8 -DMIN_BLOCKS=4 -std=c++17 -O3)
nvcc "${opts[@]}" -o "$tmp/ref.cubin" "$tmp/kernels/paralingam.cu"
nvcc "${opts[@]}" -o "$tmp/tree.cubin" kernels/paralingam.cu
nvcc "${opts[@]}" -DPL_PEERS=1 -o "$tmp/peers.cubin" kernels/paralingam.cu
if cmp -s "$tmp/ref.cubin" "$tmp/tree.cubin"; then
    echo "single-GPU cubin ($arch) identical to $ref's; PL_PEERS variant compiles"
else
    echo "single-GPU cubin ($arch) differs from $ref's" >&2
    exit 1
fi
