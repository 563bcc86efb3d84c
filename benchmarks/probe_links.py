"""The GPU-side latency of each link in a multi-GPU search round (two or more GPUs).

A round of the multi-GPU search (``paralingam.search._scheduler.search_multi``)
is a chain of dependent steps across devices: the other devices' worker
kernels, an event that device 0's stream waits for, device 0's selection
kernel, peer copies of its control block and remaining set, an event that
the other devices' streams wait for, their update kernels. This probe times
each kind of link with empty kernels (nothing but the dependency), queued
behind a gate kernel on each device that spins until the host releases it,
so that the host's own launch cost is outside the timed chain:

- ``kernel``: one empty kernel after another on one stream;
- ``cross_event``: an empty kernel on device 1, then one on device 0 that
  waits for it through an event, then one on device 1 again, and so on
  (per hop: one kernel and one event wait);
- ``peer_copy``: an empty kernel on device 0 followed by a copy of
  ``--copy-bytes`` to device 1 on the same stream (per kernel and copy);
- ``round``: the multi-GPU round's chain (device 1 kernel, event, device 0
  kernel, two peer copies, event, then a kernel on each device: the
  updates), per round;
- ``host_trip``: a kernel that publishes a word in mapped host memory, the
  host spinning on it before it launches the next (the search's status
  wait), per trip; the launches go through PyCUDA with a context push and
  pop each, dearer than the search's own loop's driver calls.

Medians of ``--repeats`` chains of ``--chain`` links each; prints a table
and writes JSON (``benchmarks/_common.py``).

    python benchmarks/probe_links.py
"""

import statistics
import time

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script

# Links per timed chain, at most: all are queued behind the gate at once,
# and a launch queue that filled up would wait for the gate forever. 300
# (the round chain: about 1,500 operations per device) ran on two H100s.
MAX_CHAIN = 300

SOURCE = r"""
extern "C" __global__ void empty() {}
extern "C" __global__ void gate(volatile int *flag) { while (*flag == 0) {} }
extern "C" __global__ void publish(volatile int *word, int value) { *word = value; __threadfence_system(); }
"""


def main():
    ap = _common.parser("probe_links", __doc__, repeats=5, gpu=True)
    ap.add_argument("--chain", type=int, default=100,
                    help=f"links per timed chain, at most {MAX_CHAIN} (all are queued behind "
                         "the gate at once; a full launch queue would wait for it forever)")
    ap.add_argument("--copy-bytes", type=int, default=128,
                    help="bytes of each peer copy (the control block is about 100)")
    args = ap.parse_args()
    if not 1 <= args.chain <= MAX_CHAIN:
        ap.error(f"--chain must be 1 to {MAX_CHAIN}")

    import pycuda.driver as drv
    from pycuda.compiler import SourceModule

    drv.init()
    if drv.Device.count() < 2:
        raise SystemExit(f"needs two GPUs; {drv.Device.count()} visible")
    ctxs = [drv.Device(d).retain_primary_context() for d in (0, 1)]
    kernels, streams, bufs = [], [], []
    for i, ctx in enumerate(ctxs):
        ctx.push()
        if i == 1:
            ctx.enable_peer_access(ctxs[0])
        mod = SourceModule(SOURCE, no_extern_c=True)
        kernels.append((mod, mod.get_function("empty"), mod.get_function("publish"),
                        mod.get_function("gate")))
        streams.append(drv.Stream())
        bufs.append(drv.mem_alloc(max(args.copy_bytes, 4)))
        drv.Context.pop()
    ctxs[0].push()
    ctxs[0].enable_peer_access(ctxs[1])
    drv.Context.pop()
    events = [[], []]
    for i, ctx in enumerate(ctxs):
        ctx.push()
        events[i] = [drv.Event(drv.event_flags.DISABLE_TIMING) for _ in range(2 * args.chain + 2)]
        drv.Context.pop()

    def on(i, fn):
        ctxs[i].push()
        try:
            return fn()
        finally:
            drv.Context.pop()

    def empty(i):
        on(i, lambda: kernels[i][1](block=(32, 1, 1), grid=(1, 1), stream=streams[i]))

    def sync_all():
        for i in (0, 1):
            on(i, streams[i].synchronize)

    flags = drv.host_alloc_flags.DEVICEMAP | drv.host_alloc_flags.PORTABLE
    flag = on(0, lambda: drv.pagelocked_zeros(1, np.int32, mem_flags=flags))
    flag_dev = np.intp(on(0, flag.base.get_device_pointer))  # (one address in every context: UVA)

    def timed(queue, gated=True):
        """Seconds per link of ``queue()``'s chain: queued behind the gates, timed from their release."""
        sync_all()
        flag[0] = 0
        if gated:
            for i in (0, 1):
                on(i, lambda i=i: kernels[i][3](flag_dev, block=(1, 1, 1), grid=(1, 1),
                                                stream=streams[i]))
            queue()
            t0 = time.perf_counter()
            flag[0] = 1
        else:
            t0 = time.perf_counter()
            queue()
        sync_all()
        return (time.perf_counter() - t0) / args.chain

    def kernel_chain():
        for _ in range(args.chain):
            empty(0)

    def cross_chain():
        for k in range(args.chain):
            src, dst = (1, 0) if k % 2 == 0 else (0, 1)
            empty(src)
            ev = events[src][k]
            on(src, lambda: ev.record(streams[src]))
            on(dst, lambda: streams[dst].wait_for_event(ev))
        empty(0)

    def copy(src, dst):
        on(src, lambda: drv.memcpy_peer_async(bufs[dst], bufs[src], args.copy_bytes,
                                              ctxs[dst], ctxs[src], streams[src]))

    def copy_chain():
        for _ in range(args.chain):
            empty(0)
            copy(0, 1)

    def round_chain():
        for k in range(args.chain):
            empty(1)  # the other device's workers
            ev = events[1][k]
            on(1, lambda: ev.record(streams[1]))
            on(0, lambda: streams[0].wait_for_event(ev))
            empty(0)  # select
            copy(0, 1)  # control block
            copy(0, 1)  # remaining set
            ev0 = events[0][k]
            on(0, lambda: ev0.record(streams[0]))
            on(1, lambda: streams[1].wait_for_event(ev0))
            empty(1)  # the other device's updates
            empty(0)  # device 0's updates

    host_word = on(0, lambda: drv.pagelocked_zeros(1, np.int32, mem_flags=flags))
    dev_word = np.intp(on(0, host_word.base.get_device_pointer))

    def host_chain():
        for k in range(1, args.chain + 1):
            on(0, lambda: kernels[0][2](dev_word, np.int32(k), block=(1, 1, 1), grid=(1, 1),
                                        stream=streams[0]))
            while host_word[0] < k:
                pass

    probes = {"kernel": kernel_chain, "cross_event": cross_chain, "peer_copy": copy_chain,
              "round": round_chain, "host_trip": host_chain}
    samples = {k: [] for k in probes}
    for rep in range(args.repeats + 1):  # the first: warm-up
        for k, q in probes.items():
            host_word[0] = 0
            t = timed(q, gated=k != "host_trip")
            if rep:
                samples[k].append(t)
    rows = [{"link": k, "us": 1e6 * statistics.median(v), "samples_us": [1e6 * t for t in v]}
            for k, v in samples.items()]
    names = [drv.Device(d).name() for d in (0, 1)]
    print(f"GPUs 0, 1: {', '.join(names)}; medians of {args.repeats} chains of {args.chain}")
    print("| link | microseconds each |")
    print("|---|---|")
    for r in rows:
        print(f"| {r['link']} | {r['us']:.1f} |")
    _common.write_result(args, {"chain": args.chain, "copy_bytes": args.copy_bytes, "rows": rows})


if __name__ == "__main__":
    main()
