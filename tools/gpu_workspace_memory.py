"""Device memory a CUDA search's workspace takes, against the formula checked before it.

For each shape, allocates the workspace of ``paralingam.search._cuda`` (one
GPU, and a multi-device search's first part and replica) on device 0 and
prints the drop in free memory next to ``_cuda_state.device_bytes`` /
``replica_bytes`` and the bytes the allocation plan asks for. The driver
reserves memory in pages, so the drop is the plan's bytes rounded up; the
formula should not be far below it.

    python tools/gpu_workspace_memory.py [--sizes 100x1024 2000x8192 ...]
"""

import argparse

from paralingam.search import _cuda, _cuda_state


def measure(p, n, use_float, multi=False, replica=False):
    import pycuda.driver as drv

    _cuda.clear_cache()
    drv.Context.synchronize()
    free0 = drv.mem_get_info()[0]
    ws = _cuda._Workspace(p, _cuda_state.row_stride(n), use_float, multi=multi, replica=replica)
    drv.Context.synchronize()
    drop = free0 - drv.mem_get_info()[0]
    for buf in ws.keep:
        buf.free()
    return drop


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["10x100", "100x1024", "1000x8192", "4000x4096"],
                    help="p x n shapes")
    args = ap.parse_args()
    _cuda._context()
    print("| p | n | workspace | formula bytes | plan bytes | measured drop | drop - formula |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        p, n = (int(x) for x in size.lower().split("x"))
        ld = _cuda_state.row_stride(n)
        for label, use_float, multi, replica in (("one GPU, float32", True, False, False),
                                                 ("one GPU, float64", False, False, False),
                                                 ("first of several", True, True, False),
                                                 ("replica", True, True, True)):
            formula = (_cuda_state.replica_bytes(n, p) if replica
                       else _cuda_state.device_bytes(n, p, use_float))
            plan = sum(a.nbytes for a in _cuda_state.allocations(p, ld, use_float, multi, replica))
            drop = measure(p, n, use_float, multi, replica)
            print(f"| {p} | {n} | {label} | {formula:,} | {plan:,} | {drop:,} "
                  f"| {drop - formula:,} |")


if __name__ == "__main__":
    main()
