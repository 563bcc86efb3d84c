"""Per-kernel resources of the search's CUDA kernels on this machine's GPU.

Prints, for each ``__global__`` kernel of ``kernels/paralingam.cu`` compiled
as a search compiles it (``paralingam.search._cuda.module``'s defaults):
registers per thread, local memory per thread (register spills, or local
arrays), static shared memory and the most threads a block may have.
Exits with status 1 when ``update_cov`` cannot take the largest block the
scheduler gives it (``_scheduler.update_cov_rows``: 16 x 64 threads).

    python tools/kernel_resources.py            # the default worker block
    python tools/kernel_resources.py --warps 8  # another worker block
    python tools/kernel_resources.py --peers    # the multi-GPU build (PL_PEERS)

A kernel of the source that the build lacks (``copy_to_peers`` is in the
multi-GPU build only) is listed as such.

Why: ``update_cov`` is bounded to 1024 threads a block (64 registers a
thread) while the warp walks of its band pairs keep ``2 * PL_WARP_BATCH``
doubles in flight per lane; spills show as local memory here.
"""

import argparse
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warps", type=int, default=None, help="warps per worker block")
    ap.add_argument("--peers", action="store_true",
                    help="the multi-GPU build (-DPL_PEERS=1) instead of the one-GPU one")
    args = ap.parse_args()

    import pycuda.driver as drv

    from paralingam.search import _cuda, _scheduler

    _cuda._context()
    warps = args.warps or _cuda.DEFAULT_WARPS
    min_blocks = (max(1, _cuda.DEFAULT_MIN_BLOCKS * _cuda.DEFAULT_WARPS // warps)
                  if _cuda.DEFAULT_MIN_BLOCKS else 0)
    min_blocks = min(min_blocks, 2048 // (32 * warps))
    source = _cuda.kernel_source()
    mod = drv.module_from_buffer(_cuda.compile_kernels(source, warps, min_blocks, args.peers))
    names = re.findall(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\(',
                       source)
    a = drv.function_attribute
    print(f"{'kernel':<28} {'regs':>5} {'local B':>8} {'shared B':>9} {'max threads':>12}")
    limits = {}
    for name in names:
        try:
            fn = mod.get_function(name)
        except drv.LogicError:  # (CUDA_ERROR_NOT_FOUND: compiled out of this build)
            print(f"{name:<28} not in the {'multi' if args.peers else 'one'}-GPU build")
            continue
        limits[name] = fn.get_attribute(a.MAX_THREADS_PER_BLOCK)
        print(f"{name:<28} {fn.get_attribute(a.NUM_REGS):>5} "
              f"{fn.get_attribute(a.LOCAL_SIZE_BYTES):>8} "
              f"{fn.get_attribute(a.SHARED_SIZE_BYTES):>9} {limits[name]:>12}")
    largest = 16 * _scheduler.update_cov_rows(1, True)
    if limits.get("update_cov", 0) < largest:
        print(f"update_cov takes at most {limits.get('update_cov')} threads a block; "
              f"the scheduler launches {largest}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
