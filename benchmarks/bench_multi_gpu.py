"""One causal-order search on one GPU and on several GPUs of the host: same data, same run.

For each case, the median CUDA search time (``stats["time"]["search"]``,
float32 with certified roots; the fits skip the adjacency step) on GPU 0
alone (``devices=None``) and on ``--devices`` (default: every visible GPU)
for each ``--spread-work`` bound (``_cuda.MULTI_SPREAD_WORK``: iterations
with fewer sample pairs run on the first GPU alone), alternated within each
repeat; the speedups, and whether the orders are identical. Prints a table
and writes JSON.

What bounds the speedup: one more one-GPU search per case with CUDA events
around its phases (``profile=True``, as ``tools/profile_launch.py``):
prepare, rounds, redo (float64 re-decisions), update, of which only the
rounds of the spread iterations and the re-decisions run on every GPU.
Amdahl's bound for D GPUs is then T / (T - S (1 - 1/D)), with T the
profiled search time and S the spread part (rounds only, and rounds plus
re-decisions; all the re-decisions are counted, so the bound is an upper
one). For the multi-GPU search, the host's time per iteration outside its
waits for round statuses (``_cuda.LAST_MULTI_RUN``): launches, event
waits and copies queued by the host loop.

    python benchmarks/bench_multi_gpu.py                # p=2000 n=8192, p=5000 n=4096
    python benchmarks/bench_multi_gpu.py --quick        # a small smoke case
    python benchmarks/bench_multi_gpu.py --large        # also p=10000 n=10000
    python benchmarks/bench_multi_gpu.py --spread-work 1e7 1e8
    python benchmarks/bench_multi_gpu.py --sizes 2000x8192 5000x4096 --case-repeats 3 1
    python benchmarks/bench_multi_gpu.py --mode memory  # device memory per GPU (formula, no GPU)
    python benchmarks/bench_multi_gpu.py --mode multi-only --sizes 10000x10000  # no one-GPU run
    python benchmarks/bench_multi_gpu.py --mode kernels-ab --baseline-kernels DIR --sizes 3000x4096
    python benchmarks/bench_multi_gpu.py --mode options-ab --variant claim16=-DPL_CLAIM_BATCH=16
    python benchmarks/bench_multi_gpu.py --mode options-ab --variant plain=MULTI_PROGRAMMATIC_LAUNCH=False
    python benchmarks/bench_multi_gpu.py --mode engine-stats --sizes 3000x4096
    python benchmarks/bench_multi_gpu.py --mode phases --sizes 4000x4096

``--mode multi-only`` times the multi-GPU search alone, once per case, with no
warm-up, one-GPU reference or phase split (for sizes where one GPU would
take most of a call): the search time and the whole fit's wall time up to
the search, the compilation included on the first case. Every mode's data
(``case_data``) of p > 2000 come from ``blocked_lingam_data`` (the same
model as ``make_lingam_data``, built with matrix products: the
column-by-column build costs O(n p^2) memory traffic, 85 s at p=5000,
n=4096 on the 2-core VM and minutes at p=10,000). (The split table's
p=5000 rows up to 6c0eeb7 used ``make_lingam_data``'s own build.)

``--mode kernels-ab`` is the same-run A/B of a change to the multi-GPU
kernels: the multi-GPU search with this tree's kernels against those of
``--baseline-kernels DIR`` (a ``kernels/`` folder of another commit, e.g.
``mkdir -p DIR && git archive REV kernels | tar -x --strip-components=1 -C DIR``),
alternated on the same data in one process, after one warm-up search of
each. Only the multi-GPU module (``PL_PEERS``) is built from DIR; the host
code and the one-GPU kernels are this tree's, so DIR must be a tree whose
kernels this host code can launch (from 6c0eeb7 on: the host loads
``copy_to_peers``).

``--mode options-ab`` is the same for compile options of this tree's
multi-GPU kernels (each ``--variant LABEL=OPTIONS``, e.g. another
``PL_CLAIM_BATCH``) against the kernels as they are; an option of the form
``MULTI_NAME=VALUE`` instead sets the host loop's setting of that name in
``paralingam.search._cuda`` while the variant's searches run (e.g.
``--variant engine=MULTI_COPY_KERNEL=False``). Both modes also time
one one-GPU search per round (the speed-ups' baseline) and record each
variant's pairs compared, rounds and float64 re-decisions.

``--mode engine-stats`` asks where each GPU's threshold-round engines spend
their time: the kernels as they are against their diagnostic build
(``kernels/engine_stats.cu`` ahead of the kernels, alternated as in
options-ab), which sums on each
device the pairs its engines compared and the clock cycles they spent
finding and claiming work, comparing and recording results, and the span
of each worker launch. Per device: the share of the pairs, the cycles per
pair of each part (the first device holds the shared state; the others
reach it over the link), the engines' alive time over the search's, and
how that splits into the worker launches' share of the search and the
engines' alive time within them.

``--mode phases`` splits the time of each GPU's stream into phases with
CUDA events (``_cuda.search(profile=True)``; ``_scheduler.MULTI_PHASES``):
prepare (prep, setup; from the first iteration on, as on one GPU), rounds
(the worker kernels), redo, update, select and copy (device 0's selections
and its copies to the replicas), wait (for another device's event) and
idle (the stream's work done before the host queued more). One profiled
one-GPU search and one profiled multi-GPU search per repeat, after an
unprofiled one of each (warm-up and the plain times); the events keep
kernels from overlapping, so the profiled searches take somewhat longer.
"""

import statistics
import time
import warnings
from pathlib import Path

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script
import paralingam
from paralingam.datasets import _draw_model, make_lingam_data
from paralingam.search import _cuda_state

DEFAULT_SIZES = ["2000x8192", "5000x4096"]
LARGE_SIZES = ["10000x10000"]
QUICK_SIZES = ["400x4096"]
MEMORY_SIZES = ["2000x8192", "5000x4096", "10000x10000", "20000x10000"]


def fit_once(X, **kwargs):
    """``fit``'s phases up to the search on the CUDA backend (the adjacency step, the
    same for any number of GPUs, is left out): an object with ``causal_order``
    and ``stats`` (the search's per-iteration lists and ``time``)."""
    from types import SimpleNamespace

    from paralingam import _api
    from paralingam._validation import _as_data_matrix

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        times = {}
        data, names, exponents = _as_data_matrix(X, None, scaled=True)
        settings = _api.check_settings(data.shape[1], names, backend="cuda",
                                       n_samples=data.shape[0], **kwargs)
        data, _ = _api.prepare(data, None, settings, exponents=exponents)
        found = _api.search(data, settings, names, times)
    per_it = found.per_iteration
    return SimpleNamespace(causal_order=[int(v) for v in found.order],
                           stats={**per_it, "time": times})


def phase_split(X, devices=None):
    """A search with CUDA events around its phases (one GPU, or ``devices``):
    (times, per_iteration, order)."""
    from paralingam import _api
    from paralingam.search import _cuda, policy

    n = X.shape[0]
    times = {}
    order, _, per_it, _ = _cuda.search(
        np.ascontiguousarray(X), threshold=True, gamma0=_api.default_gamma0(n), c=_api.DEFAULT_C,
        dtype="float32", collinear_tol=policy.COLLINEAR_TOL, explained_tol=policy.EXPLAINED_TOL,
        drift_tol=_api.DRIFT_TOL, times=times, profile=True, devices=devices)
    return times, per_it, [int(v) for v in order]


def phases(sizes, case_repeats, devices, args):
    """Each GPU's stream split into phases, one GPU against ``devices`` (module docstring)."""
    from paralingam.search import _scheduler

    rows = []
    for size, repeats in zip(sizes, case_repeats):
        p, n = _common.parse_size(size)
        X = case_data(p, n)
        ref = fit_once(X)  # warm-up and the order's reference
        plain_many = fit_once(X, devices=devices)
        same = plain_many.causal_order == ref.causal_order
        plain = {"one_gpu_s": ref.stats["time"]["search"],
                 "multi_gpu_s": plain_many.stats["time"]["search"]}
        runs = []
        for _ in range(repeats):
            t1, it1, o1 = phase_split(X)
            tm, itm, om = phase_split(X, devices)
            same &= o1 == ref.causal_order and om == ref.causal_order
            runs.append({"one_gpu": {"search_s": t1["search"],
                                     "phases_s": {k[4:]: t1[k] for k in t1 if k.startswith("gpu_")}},
                         "multi_gpu": {"search_s": tm["search"],
                                       "phases_s_by_device": itm["gpu_time_by_device"]},
                         "rounds": [int(sum(it1["rounds"])), int(sum(itm["rounds"]))],
                         "compared": [int(sum(it1["compared"])), int(sum(itm["compared"]))]})
        row = {"case": f"sparse p={p} n={n}", "p": p, "n": n, "devices": devices,
               "repeats": repeats, "plain": plain, "runs": runs, "same_order": bool(same),
               "iterations": len(ref.stats["remaining"])}
        rows.append(row)
        _common.write_result(args, {"phases": list(_scheduler.MULTI_PHASES), "rows": rows})
        del X
    for row in rows:
        run = row["runs"][-1]
        print(f"\n{row['case']} (last repeat; unprofiled: one GPU {row['plain']['one_gpu_s']:.3f} s, "
              f"{len(devices)} GPUs {row['plain']['multi_gpu_s']:.3f} s; same order "
              f"{row['same_order']}): seconds per phase of each stream")
        names = list(_scheduler.MULTI_PHASES)
        print("| stream | search | " + " | ".join(names) + " |")
        print("|---|---|" + "---|" * len(names))
        lines = [("one GPU", run["one_gpu"]["search_s"], run["one_gpu"]["phases_s"])] + [
            (f"GPU {d} of {len(devices)}", run["multi_gpu"]["search_s"], ph)
            for d, ph in zip(devices, run["multi_gpu"]["phases_s_by_device"])]
        for label, total, ph in lines:
            print(f"| {label} | {total:.3f} | " + " | ".join(
                f"{ph[k]:.3f}" if k in ph else "" for k in names) + " |")
    return rows


def blocked_lingam_data(p, n, seed, block=256):
    """Sparse LiNGAM data of ``make_lingam_data``'s model (parents, weights, noise,
    each variable scaled to unit variance as it is built, columns shuffled),
    built a block of variables at a time: the parents' part from earlier
    blocks is one matrix product. The rounding differs from
    ``make_lingam_data``'s, so the values are not the same."""
    rng = np.random.default_rng(seed)
    B, X = _draw_model(rng, p, n, "sparse")
    X = np.asfortranarray(X)  # the noise, replaced column by column by the variables
    for b0 in range(0, p, block):
        b1 = min(p, b0 + block)
        if b0:
            X[:, b0:b1] += X[:, :b0] @ B[b0:b1, :b0].T
        for i in range(b0, b1):
            if i > b0:
                X[:, i] += X[:, b0:i] @ B[i, b0:i]
            scale = X[:, i].std()
            X[:, i] /= scale
            B[i] /= scale
    perm = rng.permutation(p)
    return np.ascontiguousarray(X[:, perm])


def case_data(p, n):
    """A case's data: ``make_lingam_data``'s, or ``blocked_lingam_data``'s from p > 2000."""
    if p > 2000:
        return blocked_lingam_data(p, n, 1000 * p + n)
    return make_lingam_data(p, n, density="sparse", random_state=1000 * p + n)[0]


def multi_only(sizes, devices, args):
    """The multi-GPU search alone, once per case (see the module docstring)."""
    rows = []
    for size in sizes:
        p, n = _common.parse_size(size)
        t0 = time.perf_counter()
        X = case_data(p, n)
        t_data = time.perf_counter() - t0
        print(f"p={p} n={n}: data in {t_data:.1f} s", flush=True)
        t0 = time.perf_counter()
        r = fit_once(X, devices=devices, progress=True)
        wall = time.perf_counter() - t0
        row = {"case": f"sparse p={p} n={n}", "p": p, "n": n, "devices": devices,
               "search_s": r.stats["time"]["search"], "fit_to_search_wall_s": wall,
               "phases_s": {k: float(v) for k, v in r.stats["time"].items()},
               "data_s": t_data, "iterations": len(r.stats["remaining"]),
               "compared": int(sum(r.stats["compared"])), "rounds": int(sum(r.stats["rounds"])),
               "float64_redo": int(sum(r.stats["float64_redo"])),
               "first_case_includes_compilation": not rows}
        rows.append(row)
        print(f"{row['case']}: {len(devices)} GPUs search {row['search_s']:.1f} s "
              f"(wall up to the search {wall:.1f} s)", flush=True)
        _common.write_result(args, {"rows": rows})
        del X
    return rows


def kernels_ab(sizes, case_repeats, devices, args):
    """The multi-GPU search with this tree's kernels against ``--baseline-kernels``'
    (see the module docstring), alternated; the one-GPU order is the reference."""
    from paralingam.search import _cuda

    folder = Path(args.baseline_kernels)
    source = _cuda.kernel_source(read=lambda name: (folder / name).read_text())
    rows = alternate_kernels({"baseline": (source, ()), "this_tree": (None, ())},
                             sizes, case_repeats, devices, args, {"baseline_kernels": str(folder)})
    return rows


def options_ab(sizes, case_repeats, devices, args):
    """The multi-GPU search with this tree's kernels as they are against the same
    kernels compiled with each ``--variant LABEL=OPTIONS`` (e.g. another
    ``PL_CLAIM_BATCH``, or ``MULTI_*=VALUE`` host settings), alternated; the
    one-GPU order is the reference."""
    variants = {"default": (None, ())}
    variants.update((label, (None, options)) for label, options in args.variants.items())
    return alternate_kernels(variants, sizes, case_repeats, devices, args,
                             {"variants": {k: list(v[1]) for k, v in variants.items()}})


ENGINE_STATS = ("pairs", "claim_cycles", "compare_cycles", "record_cycles", "engines",
                "alive_cycles", "all_pairs_pairs", "last_search_cycles", "launch_span_ns",
                "launches")  # kernels/engine_stats.cu, pl_engine_stats


def engine_stats(sizes, case_repeats, devices, args):
    """The diagnostic build's per-device engine sums (see the module docstring)."""
    import pycuda.driver as drv

    from paralingam import _constants, _testing
    from paralingam.search import _cuda

    label = "engine_stats"
    # the diagnostic build: kernels/engine_stats.cu ahead of this tree's kernels
    stats_source = _constants.kernel_text("engine_stats.cu")
    variants = {"default": (None, ()), label: (stats_source + _cuda.kernel_source(), ())}

    def stats_globals():
        # the modules the search just loaded: module() with the defaults the
        # search used must find them loaded, or its sums are not these
        misses = _cuda._module.cache_info().misses
        out = []
        for d in devices:
            ctx = _cuda._device_context(d)
            mod = _cuda._in_context(ctx, _cuda.module, ctx=ctx, peers=True)
            out.append((ctx, *_testing.module_global(mod, "pl_engine_stats")))
        if _cuda._module.cache_info().misses != misses:
            raise RuntimeError("engine-stats: the search's modules were not the default ones "
                               "(other worker block settings?); their sums cannot be read")
        return out

    def observe(variant, result, per_device):
        if variant != label:
            return
        for i, (ctx, ptr, size) in enumerate(stats_globals()):
            host = np.zeros(size // 8, dtype=np.uint64)
            _cuda._in_context(ctx, drv.memcpy_dtoh, host, ptr)
            _cuda._in_context(ctx, drv.memset_d32, ptr, 0, size // 4)
            per_device[i].append(dict(zip(ENGINE_STATS, (int(v) for v in host))))

    extra = {"variants": {"default": [], label: ["kernels/engine_stats.cu prepended"]},
             "engine_stats": list(ENGINE_STATS)}
    rows = alternate_kernels(variants, sizes, case_repeats, devices, args, extra, observe=observe)
    one_gpu_engine_stats(rows, stats_source)
    # (the devices' reported clock rate turns cycles into seconds; under load
    # the clock may run below it, so the shares below are estimates)
    sm_hz = 1e3 * _cuda._in_context(_cuda._device_context(devices[0]), lambda: drv.Context.get_device()
                                    .get_attribute(drv.device_attribute.CLOCK_RATE))
    _common.write_result(args, {**extra, "rows": rows, "sm_clock_hz": sm_hz})
    for row in rows:
        last = [runs[-1] for runs in row["engine_stats"]]
        total = sum(d["pairs"] for d in last) or 1
        counted = total + sum(d["all_pairs_pairs"] for d in last)
        print(f"{row['case']}: per device (last search of the diagnostic build; its engines "
              f"counted {counted} pairs, the search {row['counts'][label]['compared']})")
        print("| device | pairs | share | claim cycles/pair | compare cycles/pair | "
              "record cycles/pair | last search cycles/pair | alive cycles/pair | engines | "
              "all-pairs pairs |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        one = row["one_gpu_engine_stats"]
        for d, st in [("one GPU", one)] + list(zip(devices, last)):
            per = max(st["pairs"], 1)
            share = "" if st is one else f"{st['pairs'] / total:.1%}"
            print(f"| {d} | {st['pairs']} | {share} | "
                  f"{st['claim_cycles'] / per:.0f} | {st['compare_cycles'] / per:.0f} | "
                  f"{st['record_cycles'] / per:.0f} | {st['last_search_cycles'] / per:.0f} | "
                  f"{st['alive_cycles'] / per:.0f} | "
                  f"{st['engines']} | {st['all_pairs_pairs']} |")
        # the engines' share of the search's wall time: the last diagnostic
        # search's sums over its time, engines per round from its rounds of
        # threshold workers (an all-pairs round has no engine sums)
        counts = row["counts"][label]
        busy = [(row["one_gpu_engine_search_s"], one,
                 row["one_gpu_engine_rounds"] - row["one_gpu_engine_all_pairs"])] + [
            (row["times"][label][-1], st, counts["rounds"] - counts["all_pairs"]) for st in last]
        print("engines alive / search: " + ", ".join(
            f"{_common.engine_alive_share(st, r, t, sm_hz):.0%}" for t, st, r in busy)
            + " (one GPU, then each device)")
        # where the rest is: between the worker launches, or inside them
        launched = [(t, st) for t, st, _ in busy if st["launches"]]
        print("worker launches / search: " + ", ".join(
            f"{st['launch_span_ns'] * 1e-9 / t:.0%}" for t, st in launched)
            + "; engines alive / worker launches: " + ", ".join(
            f"{_common.engine_alive_share(st, st['launches'], st['launch_span_ns'] * 1e-9, sm_hz):.0%}"
            for _, st in launched))
    return rows


def one_gpu_engine_stats(rows, stats_source):
    """Each row's one-GPU search in the diagnostic build (``stats_source`` ahead of the
    kernels): its engine sums, time and rounds."""
    import pycuda.driver as drv

    from paralingam import _testing
    from paralingam.search import _cuda

    with _common.compile_hook(lambda source, peers: (stats_source + source, ())):
        for row in rows:
            X = case_data(row["p"], row["n"])
            fit_once(X)  # warm-up (and the module's compile)
            ptr, size = _testing.module_global(_cuda.module(), "pl_engine_stats")
            drv.memset_d32(ptr, 0, size // 4)
            r = fit_once(X)
            host = np.zeros(size // 8, dtype=np.uint64)
            drv.memcpy_dtoh(host, ptr)
            row["one_gpu_engine_stats"] = dict(zip(ENGINE_STATS, (int(v) for v in host)))
            row["one_gpu_engine_search_s"] = r.stats["time"]["search"]
            row["one_gpu_engine_rounds"] = int(sum(r.stats["rounds"]))
            row["one_gpu_engine_all_pairs"] = int(sum(r.stats["all_pairs"]))
            del X


def alternate_kernels(variants, sizes, case_repeats, devices, args, extra, observe=None):
    """Time the multi-GPU search with each variant's ``PL_PEERS`` module, alternated.

    ``variants``: label -> (kernel source or None for this tree's, added
    compile options and ``MULTI_*`` host settings, see ``_common.host_settings``).
    The first variant is the baseline of each row's
    ``change_by_variant``. Each case: one one-GPU fit (the order's reference
    and the one-GPU kernels' warm-up) and one warm-up search per variant
    (compilation, buffers), then ``repeats`` rounds of one one-GPU search
    and one search per variant; medians, and each variant's pairs compared,
    rounds and float64 re-decisions (its last search). ``observe(label,
    result, per_device)``, if given, is called after every search of a
    variant (warm-ups included) with a list per device it may append to,
    recorded as the row's ``engine_stats``.
    """
    from paralingam.search import _cuda

    active = [None]

    split = {label: _common.host_settings(options) for label, (_, options) in variants.items()}

    def change(source, peers):  # the active variant's multi-GPU module; the one-GPU one as it is
        if not peers or active[0] is None:
            return source, ()
        return variants[active[0]][0] or source, split[active[0]][0]

    per_device = [[] for _ in devices]

    def search_with(label, X):
        active[0] = label
        _cuda._module.cache_clear()  # load the module of these kernels (disk cache)
        settings = split[label][1]
        saved = {name: getattr(_cuda, name) for name in settings}
        for name, value in settings.items():
            setattr(_cuda, name, value)
        try:
            result = fit_once(X, devices=devices)
        finally:
            for name, value in saved.items():
                setattr(_cuda, name, value)
        if observe is not None:
            observe(label, result, per_device)
        return result

    labels = list(variants)
    rows = []
    with _common.compile_hook(change):
        for size, repeats in zip(sizes, case_repeats):
            p, n = _common.parse_size(size)
            X = case_data(p, n)
            ref = fit_once(X)  # the one-GPU order (and the warm-up of the one-GPU kernels)
            same = all([search_with(k, X).causal_order == ref.causal_order for k in labels])  # warm-ups
            times, one_gpu, counts = {k: [] for k in labels}, [], {}
            for _ in range(repeats):
                r1 = fit_once(X)
                one_gpu.append(r1.stats["time"]["search"])
                same &= r1.causal_order == ref.causal_order
                for k in labels:
                    r = search_with(k, X)
                    times[k].append(r.stats["time"]["search"])
                    same &= r.causal_order == ref.causal_order
                    counts[k] = {key: int(sum(r.stats[key]))
                                 for key in ("compared", "rounds", "float64_redo", "all_pairs")}
            medians = {k: statistics.median(v) for k, v in times.items()}
            base = medians[labels[0]]
            one = statistics.median(one_gpu)
            row = {"case": f"sparse p={p} n={n}", "p": p, "n": n, "devices": devices,
                   "repeats": repeats, "one_gpu_s": one, "one_gpu_times": one_gpu, "times": times,
                   "medians_s": medians, "counts": counts,
                   "change_by_variant": {k: medians[k] / base - 1.0 for k in labels[1:]},
                   "speedup": {k: one / medians[k] for k in labels},
                   "same_order": bool(same)}
            if observe is not None:
                row["engine_stats"] = [list(runs) for runs in per_device]
            for runs in per_device:
                runs.clear()
            if labels == ["baseline", "this_tree"]:  # (the kernels-ab table's columns)
                row.update(baseline_s=base, this_tree_s=medians["this_tree"],
                           change=medians["this_tree"] / base - 1.0)
            rows.append(row)
            print(f"{row['case']}: one GPU {one:.3f} s; {len(devices)} GPUs " +
                  ", ".join(f"{k} {medians[k]:.3f} s ({one / medians[k]:.2f}x, "
                            f"{counts[k]['compared']} pairs, {counts[k]['rounds']} rounds)"
                            for k in labels) + f"; same order {same}", flush=True)
            _common.write_result(args, {**extra, "rows": rows})
            del X
    return rows


def amdahl(times, per_it, n, bound, n_dev):
    """The phase split and the speedup bounds for ``n_dev`` GPUs at spread bound ``bound``."""
    rounds = per_it["gpu_rounds_s"]
    spread_rounds = sum(secs for r, secs in zip(per_it["remaining"], rounds)
                        if r * (r - 1) // 2 * n > bound)
    T = times["search"]
    redo = times["gpu_redo"]

    def bound_of(S):
        return T / max(T - S * (1.0 - 1.0 / n_dev), 1e-12)

    return {
        "profiled_search_s": T,
        "prepare_s": times["gpu_prepare"], "rounds_s": times["gpu_rounds"], "redo_s": redo,
        "update_s": times["gpu_update"], "spread_rounds_s": spread_rounds,
        "bound_rounds": bound_of(spread_rounds),
        "bound_rounds_redo": bound_of(spread_rounds + redo),
    }


def memory_rows(sizes):
    """Device memory of one search per GPU, from paralingam.search._cuda_state's formulas."""
    rows = []
    for size in sizes:
        p, n = _common.parse_size(size)
        rows.append({
            "p": p, "n": n,
            "one_gpu_float32_bytes": _cuda_state.device_bytes(n, p, True),
            "one_gpu_float64_bytes": _cuda_state.device_bytes(n, p, False),
            "other_gpus_bytes": _cuda_state.replica_bytes(n, p),
        })
    return rows


def print_memory(rows):
    gib = 2.0 ** 30
    print("| p | n | one GPU or the first of several, float32 | float64 | each other GPU |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['p']} | {r['n']} | {r['one_gpu_float32_bytes'] / gib:.1f} GiB | "
              f"{r['one_gpu_float64_bytes'] / gib:.1f} GiB | {r['other_gpus_bytes'] / gib:.1f} GiB |")


def main():
    ap = _common.parser("bench_multi_gpu", __doc__, repeats=3, gpu=True,
                        quick=f"only {' '.join(QUICK_SIZES)}",
                        modes=("split", "memory", "multi-only", "kernels-ab", "options-ab",
                               "engine-stats", "phases"))
    ap.add_argument("--sizes", nargs="*", default=None, metavar="PxN",
                    help=f"cases as variables x samples (default: {' '.join(DEFAULT_SIZES)})")
    ap.add_argument("--devices", nargs="*", type=int, default=None,
                    help="GPU ids of the multi-GPU search (default: all)")
    ap.add_argument("--spread-work", nargs="*", type=float, default=None, metavar="PAIRS",
                    help="MULTI_SPREAD_WORK bounds to time the multi-GPU search with "
                         "(default: the package's)")
    ap.add_argument("--case-repeats", nargs="*", type=int, default=None, metavar="N",
                    help="repeats of each case in --sizes' order (default: --repeats for all)")
    ap.add_argument("--large", action="store_true", help=f"add {' '.join(LARGE_SIZES)}")
    ap.add_argument("--baseline-kernels", metavar="DIR",
                    help="kernels-ab: the kernels/ folder to compare this tree's with")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=OPTIONS",
                    help="options-ab: compile options of a variant of this tree's multi-GPU "
                         "kernels (e.g. claim16=-DPL_CLAIM_BATCH=16), or MULTI_NAME=VALUE host "
                         "settings (e.g. engine=MULTI_COPY_KERNEL=False); repeatable")
    args = ap.parse_args()
    if args.mode == "kernels-ab" and not args.baseline_kernels:
        ap.error("--mode kernels-ab needs --baseline-kernels DIR")
    if args.mode == "options-ab" and not args.variant:
        ap.error("--mode options-ab needs one or more --variant LABEL=OPTIONS")
    if args.variant and args.mode != "options-ab":
        ap.error("--variant is for --mode options-ab")
    if args.baseline_kernels and args.mode != "kernels-ab":
        ap.error("--baseline-kernels is for --mode kernels-ab")
    # label -> compile options (options-ab), parsed once here
    args.variants = _common.parse_variants(args.variant, "claim16=-DPL_CLAIM_BATCH=16")

    if args.mode == "memory":  # the device memory per GPU of MEMORY_SIZES; no GPU needed
        rows = memory_rows(MEMORY_SIZES)
        print_memory(rows)
        _common.write_result(args, {"kind": "memory (paralingam.search._cuda_state formulas)",
                                    "memory": rows})
        return

    import pycuda.driver as drv

    from paralingam.search import _cuda, _scheduler

    sizes = QUICK_SIZES if args.quick else (args.sizes or DEFAULT_SIZES)
    if args.large:
        sizes = list(sizes) + LARGE_SIZES
    _cuda._context()
    count = drv.Device.count()
    devices = args.devices if args.devices is not None else list(range(count))
    if len(devices) < 2:
        raise SystemExit(f"needs two or more GPUs; {count} visible")
    names = [drv.Device(d).name() for d in devices]
    peers = {f"{d}->{devices[0]}": _scheduler.peer_support(d, devices[0]) for d in devices[1:]}
    print(f"GPUs {devices}: {', '.join(names)}; peer (access, native atomics) {peers}; "
          f"medians of {args.case_repeats or args.repeats} repeats", flush=True)
    if args.mode == "multi-only":
        multi_only(sizes, devices, args)
        return
    bounds = args.spread_work or [_cuda.MULTI_SPREAD_WORK]
    case_repeats = args.case_repeats or [args.repeats] * len(sizes)
    if len(case_repeats) != len(sizes) or min(case_repeats) < 1:
        raise SystemExit(f"--case-repeats needs one count of 1 or more per case ({len(sizes)})")
    if args.mode == "kernels-ab":
        kernels_ab(sizes, case_repeats, devices, args)
        return
    if args.mode == "options-ab":
        options_ab(sizes, case_repeats, devices, args)
        return
    if args.mode == "engine-stats":
        engine_stats(sizes, case_repeats, devices, args)
        return
    if args.mode == "phases":
        phases(sizes, case_repeats, devices, args)
        return
    rows = []
    for size, repeats in zip(sizes, case_repeats):
        p, n = _common.parse_size(size)
        X = case_data(p, n)
        ref = fit_once(X)  # the first case: the warm-up (compilation and buffers)
        prof_times, prof_it, _ = phase_split(X)
        # (a later case: the reference fit is the first one-GPU timing)
        t_one, t_many, same = ([ref.stats["time"]["search"]] if rows else []), {b: [] for b in bounds}, True
        stats_many, loop_many = {}, {}
        if not rows:  # warm-up of the multi-GPU kernels and contexts (the search
            # time leaves out compilation and buffers; a later case needs none)
            for b in bounds:
                _cuda.MULTI_SPREAD_WORK = b
                same &= fit_once(X, devices=devices).causal_order == ref.causal_order
        for i in range(repeats):  # alternated, so drifts of the clocks hit all alike
            if not (rows and i == 0):
                r1 = fit_once(X)
                t_one.append(r1.stats["time"]["search"])
                same &= r1.causal_order == ref.causal_order
            for b in bounds:
                _cuda.MULTI_SPREAD_WORK = b
                rm = fit_once(X, devices=devices)
                t_many[b].append(rm.stats["time"]["search"])
                same &= rm.causal_order == ref.causal_order
                stats_many[b] = rm.stats
                loop_many[b] = dict(_cuda.LAST_MULTI_RUN)
        row = {
            "case": f"sparse p={p} n={n}", "p": p, "n": n, "devices": devices, "repeats": repeats,
            "one_gpu_s": statistics.median(t_one), "one_gpu_times": t_one,
            "multi_gpu": [{"spread_work": b, "s": statistics.median(t_many[b]), "times": t_many[b],
                           "speedup": statistics.median(t_one) / statistics.median(t_many[b]),
                           # comparisons and rounds of the last run: the threshold's
                           # overshoot and the rounds may differ from one GPU's
                           "compared": int(sum(stats_many[b]["compared"])),
                           "rounds": int(sum(stats_many[b]["rounds"])),
                           "spread_iterations": int(sum(r * (r - 1) // 2 * n > b
                                                        for r in ref.stats["remaining"])),
                           "float64_redo": int(sum(stats_many[b]["float64_redo"])),
                           "float64_redo_spread": loop_many[b]["redo_spread"],
                           # the last run's host time per iteration outside the
                           # status waits (the loop's launches, event waits, copies)
                           "host_outside_wait_ms_per_iteration": 1e3 * (
                               stats_many[b]["time"]["search"] - loop_many[b]["status_wait_s"])
                               / max(1, len(stats_many[b]["remaining"])),
                           "one_gpu_phases": amdahl(prof_times, prof_it, n, b, len(devices))}
                          for b in bounds],
            "same_order": bool(same),
            "iterations": len(ref.stats["remaining"]),
            "rounds_one_gpu": int(sum(ref.stats["rounds"])),
            "compared_one_gpu": int(sum(ref.stats["compared"])),
        }
        rows.append(row)
        multi = "  ".join(f"spread>{m['spread_work']:.0e}: {m['s']:.3f} s ({m['speedup']:.2f}x, "
                          f"bound {m['one_gpu_phases']['bound_rounds_redo']:.2f}x)"
                          for m in row["multi_gpu"])
        print(f"{row['case']:>24}: 1 GPU {row['one_gpu_s']:8.3f} s  {len(devices)} GPUs {multi}  "
              f"same order {row['same_order']}", flush=True)
        _common.write_result(args, {"gpus": names, "peers": {k: list(v) for k, v in peers.items()},
                                    "rows": rows})  # so far: a long case may be cut off
        del X
        time.sleep(0.5)

    D = len(devices)
    print(f"\n| case | 1 GPU | {D} GPUs (spread bound) | speedup | Amdahl bound: rounds | "
          "rounds + redo | host ms/iteration | same order |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for m in r["multi_gpu"]:
            a = m["one_gpu_phases"]
            print(f"| {r['case']} | {r['one_gpu_s']:.3f} s | {m['s']:.3f} s ({m['spread_work']:.0e}) | "
                  f"{m['speedup']:.2f}x | {a['bound_rounds']:.2f}x | {a['bound_rounds_redo']:.2f}x | "
                  f"{m['host_outside_wait_ms_per_iteration']:.3f} | {r['same_order']} |")
    print("\none GPU, profiled (CUDA events; the rounds of the spread iterations in brackets)")
    print("| case | search | prepare | rounds | redo | update |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        a = r["multi_gpu"][0]["one_gpu_phases"]
        print(f"| {r['case']} | {a['profiled_search_s'] * 1e3:.1f} ms | {a['prepare_s'] * 1e3:.1f} ms | "
              f"{a['rounds_s'] * 1e3:.1f} ms ({a['spread_rounds_s'] * 1e3:.1f}) | "
              f"{a['redo_s'] * 1e3:.1f} ms | {a['update_s'] * 1e3:.1f} ms |")


if __name__ == "__main__":
    main()
