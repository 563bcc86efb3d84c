"""MultiGroupDirectLiNGAM against lingam 1.13, and its compiled search against numpy's."""

import multiprocessing as mp
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from lingam_oracle import lingam_module

import paralingam
from paralingam.lingam.multi_group import (MultiGroupDirectLiNGAM, multi_group_causal_order,
                                    multi_group_scores)
from paralingam.prior import PriorKnowledge
from child_process import child_env

lingam = lingam_module("lingam", __name__)


def group_data(n, seed, p=6, noise="uniform", outliers=False):
    rng = np.random.default_rng(seed)
    B = np.tril(rng.uniform(0.5, 2.0, (p, p)) * np.sign(rng.uniform(-1, 1, (p, p)))
                * (rng.random((p, p)) < 0.5), -1)
    E = rng.uniform(size=(n, p)) if noise == "uniform" else rng.laplace(size=(n, p))
    X = E @ np.linalg.inv(np.eye(p) - B).T
    if outliers:
        X[rng.integers(0, n, 4)] *= 20.0
    return X[:, np.random.default_rng(0).permutation(p)]  # the same permutation in every group


@pytest.mark.parametrize("seed, noise, outliers", [(0, "uniform", False), (1, "laplace", False),
                                                   (2, "uniform", True), (3, "laplace", True)])
def test_fit_matches_lingam(seed, noise, outliers):
    Xs = [group_data(400, seed, noise=noise, outliers=outliers),
          group_data(250, seed + 100, noise=noise)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    ours = MultiGroupDirectLiNGAM(backend="cpu").fit(Xs)
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    for a, b in zip(ours.adjacency_matrices_, theirs.adjacency_matrices_):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.get_error_independence_p_values(Xs),
                               theirs.get_error_independence_p_values(Xs), rtol=1e-8, atol=1e-10)
    first, last = ours.causal_order_[0], ours.causal_order_[-1]
    np.testing.assert_allclose(ours.estimate_total_effect(Xs, first, last),
                               theirs.estimate_total_effect(Xs, first, last), rtol=1e-9)
    np.testing.assert_allclose(ours.estimate_total_effect2(first, last),
                               theirs.estimate_total_effect2(first, last), atol=1e-9)


def test_three_groups_of_different_sizes():
    Xs = [group_data(300, 5, p=5), group_data(150, 6, p=5), group_data(500, 7, p=5)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    assert multi_group_causal_order(Xs) == [int(i) for i in theirs.causal_order_]


@pytest.mark.parametrize("soft", [False, True])
def test_prior_knowledge_matches_lingam(soft):
    Xs = [group_data(400, 8), group_data(300, 9)]
    pk = lingam.utils.make_prior_knowledge(6, exogenous_variables=[1], no_paths=[(4, 2)],
                                           sink_variables=[5])
    theirs = lingam.MultiGroupDirectLiNGAM(prior_knowledge=pk,
                                           apply_prior_knowledge_softly=soft).fit(Xs)
    ours = MultiGroupDirectLiNGAM(prior_knowledge=pk, apply_prior_knowledge_softly=soft).fit(Xs)
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    for a, b in zip(ours.adjacency_matrices_, theirs.adjacency_matrices_):
        np.testing.assert_allclose(a, b, atol=1e-8)


def test_groups_of_very_different_sizes():
    # the scores are weighted by each group's share of the samples
    Xs = [group_data(200, 10), group_data(2000, 11)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    assert multi_group_causal_order(Xs) == [int(i) for i in theirs.causal_order_]


def test_bootstrap_matches_lingam():
    Xs = [group_data(200, 12, p=4), group_data(150, 13, p=4)]
    np.random.seed(5)
    theirs = lingam.MultiGroupDirectLiNGAM()
    rt = theirs.bootstrap(Xs, 5)
    np.random.seed(5)
    model = MultiGroupDirectLiNGAM()
    ro = model.bootstrap(Xs, 5)
    assert len(ro) == len(rt) == 2
    assert model.causal_order_ == [int(i) for i in theirs.causal_order_]  # the last resample
    for a, b in zip(ro, rt):
        np.testing.assert_allclose(a.adjacency_matrices_, b.adjacency_matrices_, atol=1e-8)
        np.testing.assert_allclose(a.total_effects_, b.total_effects_, atol=1e-8)
        assert a.get_causal_direction_counts() == b.get_causal_direction_counts()


@pytest.mark.parametrize("X_list, match", [
    (np.zeros((3, 10, 2)), "must be a list"),
    ([np.random.default_rng(0).random((10, 3))], "at least two"),
    ([np.random.default_rng(0).random((10, 3)), np.random.default_rng(1).random((10, 2))],
     "same number of features"),
])
def test_bad_input(X_list, match):
    with pytest.raises(ValueError, match=match):
        MultiGroupDirectLiNGAM().fit(X_list)


def test_a_bad_group_is_named_with_the_problem():
    from paralingam._validation import DataTypeError

    good = group_data(50, 0, p=3)
    missing = good.copy()
    missing[5, 2] = np.nan
    with pytest.raises(ValueError, match=r"^X_list\[1\]: NaN, missing or infinite values in "
                                         r"columns: column 2"):
        MultiGroupDirectLiNGAM().fit([good, missing])
    text = good.astype(object)
    text[0, 1] = "a"
    with pytest.raises(DataTypeError, match=r"^X_list\[2\]: non-numeric columns"):
        MultiGroupDirectLiNGAM().fit([good, good, text])


def test_bad_parameters():
    Xs = [group_data(50, 0, p=3), group_data(50, 1, p=3)]
    with pytest.raises(ValueError, match="adjacency"):
        MultiGroupDirectLiNGAM(adjacency="nope").fit(Xs)
    with pytest.raises(ValueError, match="n_sampling"):
        MultiGroupDirectLiNGAM().bootstrap(Xs, -1)


@pytest.mark.gpu
def test_cuda_backend_matches_lingam():
    Xs = [group_data(1000, 20, p=8), group_data(800, 21, p=8)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    ours = MultiGroupDirectLiNGAM(backend="cuda").fit(Xs)
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    for a, b in zip(ours.adjacency_matrices_, theirs.adjacency_matrices_):
        np.testing.assert_allclose(a, b, atol=1e-8)


# ---------------------------------------------------------------------------
# the compiled search (paralingam.search._multi_group) against the numpy one
# ---------------------------------------------------------------------------

def _scores_per_iteration(Xs, pk=None, soft=False, n_threads=None):
    """Every candidate's score of every iteration, both engines, along numpy's order."""
    from paralingam.search.reference import CANDIDATE, IN_VJ, OTHER, standardise

    p = Xs[0].shape[1]
    prior = PriorKnowledge(pk, p, soft=soft) if pk is not None else None
    order = multi_group_causal_order(Xs, pk, soft, engine="numpy")
    data = [np.array(X, dtype=np.float64) for X in Xs]
    total = sum(len(X) for X in data)
    weights = [len(X) / total for X in data]
    remaining = list(range(p))
    out = []
    for root in order[:-1]:
        status = np.full(len(remaining), CANDIDATE)
        if prior is not None:
            is_c, in_vj = prior.candidates(remaining)
            status = np.where(is_c, CANDIDATE, np.where(in_vj, IN_VJ, OTHER))
        cands = status == CANDIDATE
        if cands.sum() > 1:
            Zs = [standardise(X[:, remaining]) for X in data]
            ours = multi_group_scores(Zs, weights, status, engine="cpu", n_threads=n_threads)
            ref = multi_group_scores(Zs, weights, status, engine="numpy")
            out.append((ours[cands], ref[cands]))
        remaining.remove(root)
        for X in data:
            xr = X[:, root]
            rest = X[:, remaining]
            cov = ((rest - rest.mean(axis=0)) * (xr - xr.mean())[:, None]).mean(axis=0)
            X[:, remaining] = rest - (cov / np.var(xr))[None, :] * xr[:, None]
    return order, out


def _assert_engines_agree(Xs, pk=None, soft=False):
    order = multi_group_causal_order(Xs, pk, soft, engine="cpu")
    order_np, per_iteration = _scores_per_iteration(Xs, pk, soft)
    assert order == order_np
    assert per_iteration, "no iteration compared candidates"
    for ours, ref in per_iteration:
        np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12 * ref.max())
    _, scores_cpu = multi_group_causal_order(Xs, pk, soft, engine="cpu", return_scores=True)
    _, scores_np = multi_group_causal_order(Xs, pk, soft, engine="numpy", return_scores=True)
    np.testing.assert_allclose(scores_cpu, scores_np, rtol=1e-12, atol=1e-14)
    return order


@pytest.mark.parametrize("seed, noise, outliers", [(30, "uniform", False), (31, "laplace", False),
                                                   (32, "uniform", True), (33, "laplace", True)])
def test_compiled_search_equals_numpy_and_lingam(seed, noise, outliers):
    Xs = [group_data(300, seed, p=7, noise=noise, outliers=outliers),
          group_data(220, seed + 100, p=7, noise=noise, outliers=outliers)]
    order = _assert_engines_agree(Xs)
    assert order == [int(i) for i in lingam.MultiGroupDirectLiNGAM().fit(Xs).causal_order_]


def test_compiled_search_three_groups_of_unequal_sizes():
    Xs = [group_data(90, 40, p=8), group_data(600, 41, p=8, noise="laplace"),
          group_data(250, 42, p=8, outliers=True)]
    order = _assert_engines_agree(Xs)
    assert order == [int(i) for i in lingam.MultiGroupDirectLiNGAM().fit(Xs).causal_order_]


@pytest.mark.parametrize("soft", [False, True])
def test_compiled_search_with_prior_knowledge(soft):
    Xs = [group_data(300, 43, p=7), group_data(200, 44, p=7), group_data(150, 45, p=7)]
    pk = lingam.utils.make_prior_knowledge(7, exogenous_variables=[3], no_paths=[(0, 5), (2, 6)],
                                           sink_variables=[1])
    order = _assert_engines_agree(Xs, pk, soft)
    theirs = lingam.MultiGroupDirectLiNGAM(prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    assert order == [int(i) for i in theirs.fit(Xs).causal_order_]


def test_compiled_scores_with_collinear_columns():
    # exact copies and an exact sum in every group: those pairs compare as
    # I = 0 in both engines (paralingam.search.reference.pairwise_statistics). Only
    # the first iteration: once a copy's twin is regressed out, the copy has
    # no variance left (lingam's search, without a degenerate-data policy,
    # divides by zero there too).
    from paralingam.search.reference import CANDIDATE, pairwise_statistics, standardise

    Zs = []
    for seed in (46, 47):
        X = group_data(300, seed, p=5)
        Zs.append(standardise(np.column_stack([X, X[:, 1], X[:, 0] + X[:, 2]])))
        stat = pairwise_statistics(Zs[-1])
        assert stat[1, 5] == stat[5, 1] == 0.0 and np.count_nonzero(stat) < 7 * 6
    status = np.full(7, CANDIDATE)
    ours = multi_group_scores(Zs, [0.5, 0.5], status, engine="cpu")
    ref = multi_group_scores(Zs, [0.5, 0.5], status, engine="numpy")
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12 * ref.max())
    assert np.argmin(ours) == np.argmin(ref)
    from paralingam.search import _multi_group

    pair = [np.array([1, 0], dtype=np.int32), np.array([5, 1], dtype=np.int32)]
    ones = np.ones(2, dtype=np.int32)
    stat = _multi_group.pair_statistics([np.ascontiguousarray(Z.T) for Z in Zs], *pair, ones, ones)
    assert stat[:, 1, 5].tolist() == stat[:, 5, 1].tolist() == [0.0, 0.0]  # the copies
    assert np.all(stat[:, 0, 1] != 0.0) and np.all(stat[:, 1, 0] == -stat[:, 0, 1])


def test_compiled_scores_do_not_depend_on_threads():
    Xs = [group_data(500, 48, p=9, outliers=True), group_data(300, 49, p=9, noise="laplace")]
    _, one = _scores_per_iteration(Xs, n_threads=1)
    _, two = _scores_per_iteration(Xs, n_threads=2)
    for (a, _), (b, _) in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_pair_statistics_bad_input():
    from paralingam.search import _multi_group

    Z = np.ascontiguousarray(np.random.default_rng(0).standard_normal((3, 20)))
    i32 = lambda *v: np.array(v, dtype=np.int32)  # noqa: E731
    with pytest.raises(ValueError, match="same length"):
        _multi_group.pair_statistics([Z], i32(0, 1), i32(1), i32(1), i32(1))
    with pytest.raises(ValueError, match="two different local indices"):
        _multi_group.pair_statistics([Z], i32(1), i32(1), i32(1), i32(1))
    with pytest.raises(ValueError, match="two different local indices"):
        _multi_group.pair_statistics([Z], i32(0), i32(3), i32(1), i32(1))
    with pytest.raises(ValueError, match=r"rows\[1\] must be a C-contiguous float64 array"):
        _multi_group.pair_statistics([Z, Z[:2]], i32(0), i32(1), i32(1), i32(1))
    with pytest.raises(ValueError, match="engine"):
        multi_group_causal_order([Z.T, Z.T], engine="gpu")
    with pytest.raises(ValueError, match="n_threads"):
        MultiGroupDirectLiNGAM(n_threads=0).fit([Z.T, Z.T])


def _fit_orders(Xs):
    return multi_group_causal_order(Xs, n_threads=2), multi_group_causal_order(Xs, engine="numpy")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork semantics of Linux")
def test_compiled_search_in_a_forked_child():
    # the parent's thread gets an OpenMP team first (2 threads); the child
    # forked after it must not wait for the team's lost threads
    Xs = [group_data(400, 50, p=8), group_data(300, 51, p=8)]
    parent = _fit_orders(Xs)
    assert parent[0] == parent[1]
    with mp.get_context("fork").Pool(1) as pool:
        try:
            child = pool.apply_async(_fit_orders, (Xs,)).get(timeout=60)
        except mp.TimeoutError:
            pytest.fail("the multi-group search in a forked child did not finish (stale OpenMP team?)")
    assert child == parent


CHILD = textwrap.dedent('''
    import signal, sys, time, traceback, os
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    from paralingam.search import _multi_group
    from paralingam.lingam.multi_group import multi_group_causal_order

    rng = np.random.default_rng(0)
    small = [rng.uniform(size=(200, 5)) @ np.triu(rng.uniform(size=(5, 5))) for _ in range(2)]
    before = multi_group_causal_order(small, n_threads=2)
    r, n = 600, 4000  # every pair of two groups: tens of seconds on 2 cores
    rows = [np.ascontiguousarray(rng.standard_normal((r, n))) for _ in range(2)]
    ta, tb = (v.astype(np.int32) for v in np.triu_indices(r, 1))
    ones = np.ones(len(ta), dtype=np.int32)
    print("ready", flush=True)
    try:
        _multi_group.pair_statistics(rows, ta, tb, ones, ones, n_threads=2)
        print("finished", flush=True)
    except KeyboardInterrupt as exc:
        where = os.path.basename(traceback.extract_tb(exc.__traceback__)[-1].filename)
        print("interrupted", where, flush=True)
    time.sleep(0.3)
    cpu0 = time.process_time()
    time.sleep(0.5)
    print("busy %.3f" % (time.process_time() - cpu0), flush=True)
    print("after", "ok" if multi_group_causal_order(small, n_threads=2) == before else "wrong",
          flush=True)
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGINT semantics of Linux")
def test_ctrl_c_interrupts_the_compiled_search():
    env = child_env()
    # cwd: "python -c" puts the working folder first on sys.path (a source
    # checkout without compiled extensions, in CI)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            cwd=Path(paralingam.__file__).resolve().parents[1])
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-3000:]
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()
        elapsed = time.monotonic() - t0
        assert line == "interrupted _multi_group.pyx", line + proc.stderr.read()[-3000:]
        assert elapsed < 3.0, f"KeyboardInterrupt came {elapsed:.1f} s after SIGINT"
        report = dict(proc.stdout.readline().split() for _ in range(2))
        assert float(report["busy"]) < 0.1, f"threads still compute after the interrupt: {report}"
        assert report["after"] == "ok"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("scale", [1e-170, 1e-300, 1e150])
def test_a_group_on_a_tiny_or_huge_scale_gives_the_same_model(scale):
    # The search regresses and standardises each group's columns scaled by
    # powers of two, and the p-values test errors scaled the same way: on the
    # data's own scale the variances of 1e-170 columns underflowed to zero,
    # the order fell back to column order and the weights moved by 0.85
    groups = [group_data(500, 31, p=5), group_data(400, 32, p=5)]
    ref = MultiGroupDirectLiNGAM(backend="cpu").fit(groups)
    ref_p = ref.get_error_independence_p_values(groups)
    scaled = [groups[0] * scale] + groups[1:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no divide-by-zero or overflow on the way)
        model = MultiGroupDirectLiNGAM(backend="cpu").fit(scaled)
        p_values = model.get_error_independence_p_values(scaled)
    assert model.causal_order_ == ref.causal_order_
    for B, B_ref in zip(model.adjacency_matrices_, ref.adjacency_matrices_):
        np.testing.assert_allclose(B, B_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(p_values, ref_p, rtol=0, atol=1e-9)


@pytest.mark.parametrize("engine", ["cpu", "numpy"])
def test_a_column_with_no_variance_left_is_named_in_a_degenerate_data_warning(engine):
    # An exact copy in every group: once its twin is ordered, the copy has no
    # variance left and the search divides by zero, as lingam's does. It says
    # so once, by column and group, instead of numpy's bare "invalid value".
    Xs = []
    for seed in (48, 49):
        X = group_data(300, seed, p=4)
        Xs.append(np.column_stack([X, X[:, 1]]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        order = multi_group_causal_order(Xs, engine=engine)
    assert sorted(order) == list(range(5))
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    degenerate = [str(w.message) for w in caught
                  if issubclass(w.category, paralingam.DegenerateDataWarning)]
    assert len(degenerate) == 1, degenerate
    twin = 4 if order.index(1) < order.index(4) else 1
    assert f"no variance left in column {twin} (group" in degenerate[0]
    # the order is the one the search gave before (the warning only replaces numpy's)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        assert order == multi_group_causal_order(Xs, engine="numpy")
    # data without such a column: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        multi_group_causal_order([X[:, :4] for X in Xs], engine=engine)
