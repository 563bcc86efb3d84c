"""Prior knowledge: lingam's rules in paralingam.prior, the reference and the CPU backend."""

import re
import warnings

import numpy as np
import pytest
from lingam_oracle import lingam_module

from paralingam import _isa

import paralingam
from paralingam.search import reference
from paralingam.prior import PriorKnowledge

pytest.importorskip("paralingam.search._cpu", reason="the CPU extension is not built")
_cpu = _isa.load("search._cpu")  # the build fit uses (paralingam._isa)


def fit_cpu(X, **kwargs):
    """``paralingam.fit`` on the CPU, degenerate-data warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, backend="cpu", **kwargs)


def lingam_model(pk, soft):
    lingam = lingam_module("lingam", __name__)
    return lingam.DirectLiNGAM(prior_knowledge=pk, apply_prior_knowledge_softly=soft)


def lingam_order(X, pk, soft):
    """lingam's causal order, or "ValueError" when its fit raises one."""
    model = lingam_model(pk, soft)
    try:
        model.fit(np.array(X))
    except ValueError:
        return "ValueError"
    return [int(v) for v in model.causal_order_]


def outcome(func, *args, **kwargs):
    """``func(...)``, or "ValueError" when it raises one."""
    try:
        return func(*args, **kwargs)
    except ValueError:
        return "ValueError"


def prior_from_order(order, rng, density, cancel=0.0):
    """Random prior knowledge that agrees with the causal order ``order``.

    Each pair ``u`` before ``v`` gets, with probability ``density``, a path
    (``pk[v, u] = 1``), a no-path (``pk[u, v] = 0``) or both; with
    probability ``cancel`` it gets ``pk[u, v] = pk[v, u] = 0``, which lingam
    turns into no order at all. Never cyclic.
    """
    p = len(order)
    pk = -np.ones((p, p), dtype=int)
    for a in range(p):
        for b in range(a + 1, p):
            u, v = order[a], order[b]
            x = rng.random()
            if x < density / 3:
                pk[v, u] = 1
            elif x < 2 * density / 3:
                pk[u, v] = 0
            elif x < density:
                pk[v, u], pk[u, v] = 1, 0
            elif x < density + cancel:
                pk[u, v] = pk[v, u] = 0
    return pk


def true_prior(B, order, rng, n_paths=3):
    """Correct prior knowledge from the true model, with lingam's helper."""
    utils = lingam_module("lingam.utils", __name__)
    edges = np.argwhere(B != 0)  # B[i, j]: edge j -> i
    pick = edges[rng.choice(len(edges), min(n_paths, len(edges)), replace=False)]
    return utils.make_prior_knowledge(
        len(order),
        exogenous_variables=[int(order[0])],
        sink_variables=[int(order[-1])],
        paths=[(int(j), int(i)) for i, j in pick],
        no_paths=[(int(order[-2]), int(order[1]))],  # later has no path to earlier
    )


def swapped(order, rng, n_swaps):
    """``order`` with ``n_swaps`` random neighbours exchanged: partly wrong."""
    order = list(order)
    for k in rng.choice(len(order) - 1, n_swaps, replace=False):
        order[k], order[k + 1] = order[k + 1], order[k]
    return order


# --------------------------------------------------------------------------
# Validation of the matrix
# --------------------------------------------------------------------------

def test_shape_must_be_n_features_squared():
    with pytest.raises(ValueError, match=r"shape \(3, 3\).*got shape \(3, 4\)"):
        PriorKnowledge(-np.ones((3, 4)), 3)
    with pytest.raises(ValueError, match=r"shape \(3, 3\).*got shape \(4, 4\)"):
        PriorKnowledge(-np.ones((4, 4)), 3)
    with pytest.raises(ValueError, match=r"square; got shape \(2, 3\)"):
        PriorKnowledge(-np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"got shape \(9,\)"):
        PriorKnowledge(-np.ones(9), 3)
    with pytest.raises(ValueError, match=r"got shape \(3, 3, 1\)"):
        PriorKnowledge(-np.ones((3, 3, 1)), 3)
    with pytest.raises(ValueError, match="numeric"):
        PriorKnowledge([["a", "b"], ["c", "d"]], 2)


@pytest.mark.parametrize("n_features", ["4", 4.0, 0, -1, True])
def test_n_features_must_be_a_positive_int(n_features):
    # "4" gave "must be of shape (4, 4) ... got shape (4, 4)"
    with pytest.raises(ValueError, match=re.escape(
            f"n_features must be an integer >= 1; got {n_features!r}")):
        PriorKnowledge(-np.ones((4, 4)), n_features)
    assert PriorKnowledge(-np.ones((4, 4)), np.int64(4)).n_features == 4


def test_fit_names_a_wrong_shape(lingam_data):
    X = lingam_data(5, 300, "sparse", 1101)[0]
    with pytest.raises(ValueError, match=r"\(5, 5\).*got shape \(4, 4\)"):
        paralingam.fit(X, backend="cpu", prior_knowledge=-np.ones((4, 4)))
    with pytest.raises(ValueError, match=r"got shape \(5, 6\)"):
        paralingam.fit(X, backend="cpu", prior_knowledge=-np.ones((5, 6)),
                       apply_prior_knowledge_softly=True)


@pytest.mark.parametrize("value", [0.5, 2.0, -2.0, np.inf, -np.inf])
def test_values_other_than_minus_one_zero_one_name_their_positions(value):
    pk = -np.ones((4, 4))
    pk[1, 2] = value
    pk[3, 0] = value
    with pytest.raises(ValueError, match=r"invalid at \[1, 2\] = .*, \[3, 0\] = "):
        PriorKnowledge(pk)


def test_accepted_inputs_mean_the_same():
    pd = pytest.importorskip("pandas")
    pk = np.array([[-1, 0, -1], [1, -1, -1], [-1, -1, -1]])
    expected = PriorKnowledge(pk)
    np.testing.assert_array_equal(expected.partial_orders, [[0, 1]])
    nan = np.where(pk == -1, np.nan, pk).astype(float)
    for other in (pk.tolist(), nan, pd.DataFrame(pk, columns=list("abc")), pk.astype(np.int8)):
        got = PriorKnowledge(other, 3)
        np.testing.assert_array_equal(got.partial_orders, expected.partial_orders)
        np.testing.assert_array_equal(np.isnan(got.matrix), np.isnan(nan))
    assert np.isnan(expected.matrix[0, 0]) and expected.matrix[1, 0] == 1


# --------------------------------------------------------------------------
# Partial orders and lingam's inconsistency errors (strong mode)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("pairs", [[(0, 1), (1, 0)], [(2, 2)], [(0, 3), (3, 0), (1, 1)]])
def test_paths_both_ways_are_inconsistent_as_in_lingam(pairs):
    pk = -np.ones((4, 4), dtype=int)
    for i, j in pairs:
        pk[i, j] = 1
    with pytest.raises(ValueError) as lingam_err:
        lingam_model(pk, False).fit(np.random.default_rng(0).laplace(size=(50, 4)))
    with pytest.raises(ValueError, match="inconsistent") as ours:
        PriorKnowledge(pk)
    # Both name the same positions, in lingam's format.
    listed = str(lingam_err.value).split(": ")[-1]
    assert listed == str(sorted([list(p) for p in pairs]))
    assert listed in str(ours.value)
    # Soft mode does not extract partial orders: lingam accepts the matrix.
    PriorKnowledge(pk, soft=True)


@pytest.mark.parametrize("soft", ["False", "True", 1, None])
def test_soft_must_be_a_bool(soft):
    # bool("False") is True: a string silently chose soft mode
    pk = -np.ones((3, 3))
    pk[1, 0] = 1
    with pytest.raises(ValueError, match=f"soft must be True or False; got {soft!r}"):
        PriorKnowledge(pk, soft=soft)
    X = np.random.default_rng(0).laplace(size=(50, 3))
    with pytest.raises(ValueError, match="apply_prior_knowledge_softly must be True or False"):
        paralingam.fit(X, prior_knowledge=pk, apply_prior_knowledge_softly=soft, n_threads=1)


def test_no_path_both_ways_cancels_out():
    pk = -np.ones((3, 3), dtype=int)
    pk[0, 1] = pk[1, 0] = 0  # neither has a path to the other: no order
    pk[2, 2] = 0  # a diagonal 0 is ignored
    pk[2, 0] = 0  # 2 before 0
    pk[2, 1] = 1  # 1 before 2
    got = PriorKnowledge(pk).partial_orders
    np.testing.assert_array_equal(got, [[1, 2], [2, 0]])
    model = lingam_model(pk, False)
    theirs = model._extract_partial_orders(model._Aknw)
    assert sorted(map(tuple, theirs.tolist())) == [(1, 2), (2, 0)]


def test_partial_orders_equal_lingams_on_random_matrices():
    rng = np.random.default_rng(1102)
    seen = {"inconsistent": 0, "cycle": 0, "equal": 0}
    for _ in range(400):
        p = int(rng.integers(1, 7))
        pk = rng.choice([-1, 0, 1], size=(p, p), p=[0.6, 0.25, 0.15])
        model = lingam_model(pk, False)
        try:
            theirs = model._extract_partial_orders(model._Aknw)
        except ValueError as err:
            with pytest.raises(ValueError, match="inconsistent") as ours:
                PriorKnowledge(pk)
            assert str(err).split(": ")[-1] in str(ours.value)
            seen["inconsistent"] += 1
            continue
        theirs = sorted(map(tuple, np.reshape(theirs, (-1, 2)).tolist()))
        try:
            ours = PriorKnowledge(pk).partial_orders
        except ValueError as err:
            assert "cycle" in str(err)
            assert lingam_gets_stuck(model, p), pk
            seen["cycle"] += 1
            continue
        assert sorted(map(tuple, ours.tolist())) == theirs
        assert not lingam_gets_stuck(model, p)
        seen["equal"] += 1
    assert min(seen.values()) >= 20, seen


def lingam_gets_stuck(model, p):
    """Run lingam's strong candidate loop (first candidate as root) until done or stuck."""
    orders = model._extract_partial_orders(model._Aknw)
    U = np.arange(p)
    while len(U):
        model._partial_orders = orders
        Uc, _ = model._search_candidate(U)
        if len(Uc) == 0:
            return True
        U = U[U != Uc[0]]
        orders = orders[orders[:, 0] != Uc[0]] if len(orders) else orders
    return False


def test_cycle_raises_like_lingam():
    pk = -np.ones((4, 4), dtype=int)
    pk[1, 0] = pk[2, 1] = 1  # 0 -> 1 -> 2
    pk[2, 0] = 0  # 2 before 0: closes the cycle
    with pytest.raises(ValueError, match=r"cycle, 0 -> 1 -> 2 -> 0|cycle, 1 -> 2 -> 0 -> 1|cycle, 2 -> 0 -> 1 -> 2"):
        PriorKnowledge(pk)
    X = np.random.default_rng(1103).laplace(size=(200, 4))
    assert lingam_order(X, pk, False) == "ValueError"  # argmax of an empty sequence
    with pytest.raises(ValueError, match="cycle"):
        paralingam.fit(X, backend="cpu", prior_knowledge=pk)
    assert outcome(reference.causal_order, X, prior_knowledge=pk) == "ValueError"


# --------------------------------------------------------------------------
# Candidates against lingam's _search_candidate
# --------------------------------------------------------------------------

def random_alive(rng, p):
    return np.sort(rng.choice(p, size=int(rng.integers(1, p + 1)), replace=False))


def test_strong_candidates_equal_lingams():
    rng = np.random.default_rng(1104)
    for _ in range(300):
        p = int(rng.integers(1, 10))
        pk = prior_from_order(rng.permutation(p), rng, rng.uniform(0, 0.6), cancel=0.1)
        model = lingam_model(pk, False)
        orders = model._extract_partial_orders(model._Aknw)
        prior = PriorKnowledge(pk)
        U = random_alive(rng, p)
        # As lingam's fit: the orders of variables already ordered are gone.
        model._partial_orders = orders[np.isin(orders[:, 0], U)] if len(orders) else orders
        Uc, Vj = model._search_candidate(U)
        is_candidate, in_vj = prior.candidates(U)
        assert U[is_candidate].tolist() == [int(v) for v in Uc]
        assert Vj == [] and not in_vj.any()


def test_soft_candidates_equal_lingams():
    rng = np.random.default_rng(1105)
    seen = {"stuck": 0, "vj": 0, "exogenous": 0, "endogenous": 0}
    for _ in range(1500):
        p = int(rng.integers(1, 9))
        weights = rng.dirichlet([2, 1, 1])  # share of -1, 0 and 1
        pk = rng.choice([-1, 0, 1], size=(p, p), p=weights)
        model = lingam_model(pk, True)
        prior = PriorKnowledge(pk, soft=True)
        U = random_alive(rng, p)
        Uc, Vj = model._search_candidate(U)
        if len(Uc) == 0:  # lingam then fails with an argmax of an empty sequence
            with pytest.raises(ValueError, match="inconsistent"):
                prior.candidates(U)
            seen["stuck"] += 1
            continue
        is_candidate, in_vj = prior.candidates(U)
        assert U[is_candidate].tolist() == [int(v) for v in Uc]
        assert U[in_vj].tolist() == [int(v) for v in Vj]
        assert not (is_candidate & in_vj).any()
        sub = pk[np.ix_(U, U)]
        exo = ((sub == 0) | np.eye(len(U), dtype=bool)).all(axis=1)
        seen["exogenous" if exo.any() else "endogenous"] += 1
        seen["vj"] += bool(in_vj.any())
    assert min(seen.values()) >= 30, seen


def test_unknown_everywhere_means_no_prior_knowledge():
    pk = -np.ones((6, 6))
    alive = np.array([0, 2, 3, 5])
    for soft in (False, True):
        is_candidate, in_vj = PriorKnowledge(pk, soft=soft).candidates(alive)
        assert is_candidate.all() and not in_vj.any()


# --------------------------------------------------------------------------
# The reference's building blocks
# --------------------------------------------------------------------------

def test_collinear_groups_form_within_one_status(lingam_data):
    base = lingam_data(4, 300, "sparse", 1106)[0]
    Z = reference.standardise(np.column_stack([base, base[:, 1], -base[:, 1], 2 * base[:, 3]]))
    assert reference.collinear_groups(Z).tolist() == [0, 1, 2, 3, 1, 1, 3]
    C, V, O = reference.CANDIDATE, reference.IN_VJ, reference.OTHER
    status = np.array([C, C, O, V, V, C, V])
    assert reference.collinear_groups(Z, status=status).tolist() == [0, 1, 2, 3, 4, 1, 3]


def test_pairwise_statistics_with_v_j_and_collinear_partners(lingam_data):
    base = lingam_data(4, 300, "dense", 1107)[0]
    Z = reference.standardise(np.column_stack([base, 3 * base[:, 2]]))  # 4 copies 2
    in_vj = np.array([False, False, False, True, True])
    stat = reference.pairwise_statistics(Z, in_vj=in_vj)
    plain = reference.pairwise_statistics(Z)
    assert np.isfinite(stat).all() and np.isfinite(plain).all()
    assert stat[2, 4] == stat[4, 2] == plain[2, 4] == 0.0  # collinear: no information
    np.testing.assert_array_equal(stat[:, :3], plain[:, :3])  # only V_j partners change
    np.testing.assert_allclose(plain, -plain.T, atol=1e-15)
    for i in range(3):  # I(i, j) = H(r_i^(j)) - H(x_i) for the V_j partner j = 3
        res = Z[:, i] - np.mean(Z[:, i] * Z[:, 3]) * Z[:, 3]
        want = reference.entropy(res / res.std()) - reference.entropy(Z[:, i])
        assert stat[i, 3] == pytest.approx(want, abs=1e-12)


# --------------------------------------------------------------------------
# Orders against lingam.DirectLiNGAM on small data
# --------------------------------------------------------------------------

# (p, n, density, seed, kind of prior knowledge, soft)
LINGAM_CASES = [
    (5, 300, "sparse", 1111, "true", False),
    (8, 500, "dense", 1112, "true", True),
    (10, 800, "sparse", 1113, "wrong", False),
    (12, 400, "dense", 1114, "wrong", True),
    (15, 1000, "sparse", 1115, "random", False),
    (9, 600, "dense", 1116, "random", True),
    (7, 300, "dense", 1117, "random", False),
    (14, 700, "sparse", 1118, "true", False),
    (11, 500, "sparse", 1119, "wrong", True),
    (13, 900, "dense", 1120, "random", True),
    (8, 500, "dense", 1124, "vj", True),
    (12, 600, "sparse", 1125, "vj", True),
]


def make_prior(kind, B, order, rng, soft):
    p = len(order)
    if kind == "true":
        return true_prior(B, order, rng)
    if kind == "wrong":  # agrees with an order that has two neighbours exchanged
        pk = prior_from_order(swapped(order, rng, 2), rng, 0.15)
        if soft:
            pk[int(order[1]), :] = 0  # the second variable claimed exogenous
            pk[int(order[1]), int(order[1])] = -1
        return pk
    if kind == "vj":  # three variables claimed exogenous, the rest in V_j
        pk = -np.ones((p, p), dtype=int)
        exogenous = rng.choice(p, 3, replace=False)
        rest = np.setdiff1d(np.arange(p), exogenous)
        pk[exogenous, :] = 0
        pk[np.ix_(rest, exogenous)] = 0
        np.fill_diagonal(pk, -1)
        return pk
    if soft:  # random entries, mostly unknown
        return rng.choice([-1, 0, 1], size=(p, p), p=[0.85, 0.1, 0.05])
    return prior_from_order(rng.permutation(p), rng, 0.1, cancel=0.05)


@pytest.mark.parametrize("p, n, density, seed, kind, soft", LINGAM_CASES)
def test_orders_equal_lingam(lingam_data, p, n, density, seed, kind, soft):
    X, B, order = lingam_data(p, n, density, seed)
    pk = make_prior(kind, B, order, np.random.default_rng(seed), soft)
    expected = lingam_order(X, pk, soft)
    assert expected != "ValueError"
    ref = outcome(reference.causal_order, X, prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    assert ref[0] == expected and ref[1] == {}
    cpu = fit_cpu(X, prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    assert cpu.causal_order == expected
    if not soft:  # strong prior knowledge holds in the order
        pos = np.empty(p, dtype=int)
        pos[expected] = np.arange(p)
        for f, t in PriorKnowledge(pk).partial_orders:
            assert pos[f] < pos[t]


def test_unknown_everywhere_gives_the_plain_order(lingam_data):
    X = lingam_data(10, 500, "dense", 1121)[0]
    plain = fit_cpu(X).causal_order
    assert plain == reference.causal_order(X)[0]
    for soft in (False, True):
        pk = -np.ones((10, 10))
        assert fit_cpu(X, prior_knowledge=pk, apply_prior_knowledge_softly=soft).causal_order == plain
        assert reference.causal_order(X, prior_knowledge=pk, apply_prior_knowledge_softly=soft)[0] == plain
        assert lingam_order(X, pk, soft) == plain


def test_a_total_order_is_returned_without_comparisons(lingam_data):
    X, B, order = lingam_data(8, 300, "sparse", 1122)
    claimed = swapped(order, np.random.default_rng(1122), 3)  # need not be true
    pk = prior_from_order(claimed, np.random.default_rng(0), 0.0)
    for a in range(7):  # only neighbours: the rest follows by transitivity
        pk[claimed[a + 1], claimed[a]] = 1
    result = fit_cpu(X, prior_knowledge=pk)
    assert result.causal_order == [int(v) for v in claimed] == lingam_order(X, pk, False)
    assert result.stats["compared"] == [0] * 7


def test_random_soft_prior_knowledge_fails_like_lingam(lingam_data):
    # Dense random soft prior knowledge often leaves no candidate at some
    # step: lingam then fails (argmax of an empty sequence); so do we.
    rng = np.random.default_rng(1123)
    X = lingam_data(6, 300, "sparse", 1123)[0]
    outcomes = []
    for _ in range(12):
        pk = rng.choice([-1, 0, 1], size=(6, 6), p=[0.4, 0.3, 0.3])
        expected = lingam_order(X, pk, True)
        ref = outcome(reference.causal_order, X, prior_knowledge=pk, apply_prior_knowledge_softly=True)
        cpu = outcome(fit_cpu, X, prior_knowledge=pk, apply_prior_knowledge_softly=True)
        assert (ref if ref == "ValueError" else ref[0]) == expected
        assert (cpu if cpu == "ValueError" else cpu.causal_order) == expected
        outcomes.append(expected == "ValueError")
    assert any(outcomes) and not all(outcomes)


# --------------------------------------------------------------------------
# CPU backend against the reference on a larger case
# --------------------------------------------------------------------------

def soft_prior(B, order, rng):
    """Soft prior knowledge: four variables claimed exogenous, most others
    claimed unreachable from them (``V_j``), true sinks and true paths. The
    claims need not be true: the order must follow them as lingam's does."""
    p = len(order)
    pk = -np.ones((p, p), dtype=int)
    exogenous = rng.choice(p, 4, replace=False)
    pk[exogenous, :] = 0
    for v in rng.choice(np.setdiff1d(np.arange(p), exogenous), 30, replace=False):
        pk[v, exogenous] = 0
    for v in order[-3:]:
        pk[:, v] = 0  # sinks
    edges = np.argwhere(B != 0)
    for i, j in edges[rng.choice(len(edges), p // 2, replace=False)]:
        pk[i, j] = 1
    np.fill_diagonal(pk, -1)
    return pk


def statuses_seen(pk, soft, order):
    """Replay the candidate rule along ``order`` (no variable explained):
    which situations occurred."""
    prior = PriorKnowledge(pk, soft=soft)
    alive = sorted(order)
    seen = set()
    for root in order[:-1]:
        is_candidate, in_vj = prior.candidates(alive)
        if is_candidate.sum() > 1:
            seen.add("several candidates")
            if in_vj.any():
                seen.add("V_j partner")
            if (~is_candidate & ~in_vj).any():
                seen.add("other partner")
        alive.remove(root)
    return seen


@pytest.mark.parametrize("soft", [False, True], ids=["strong", "soft"])
def test_cpu_equals_reference_on_a_larger_case(lingam_data, soft):
    p, seed = 50, 1131 + soft
    X, B, order = lingam_data(p, 500, "sparse", seed)
    rng = np.random.default_rng(seed)
    if soft:
        pk = soft_prior(B, order, rng)
    else:
        pk = prior_from_order(swapped(order, rng, 5), rng, 0.02)
    kwargs = dict(prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    ref_order, ref_explained = reference.causal_order(X, **kwargs)
    assert ref_explained == {}
    want = {"several candidates", "other partner"} | ({"V_j partner"} if soft else set())
    assert want <= statuses_seen(pk, soft, ref_order)
    runs = [fit_cpu(X, threshold=t, n_threads=k, **kwargs)
            for t in (True, False) for k in (1, None)]
    for res in runs:
        assert res.causal_order == ref_order
        assert res.stats["explained"] == {}
        assert np.isfinite(res.adjacency_matrix).all()
        assert all(0 <= c <= q for c, q in zip(res.stats["compared"], res.stats["pairs"]))
    # Threshold off: every candidate meets every other variable once; a pair
    # of candidates is compared once (messaging), a candidate with a
    # non-candidate by the candidate alone.
    off = runs[2].stats
    expected_compared = []
    alive = list(range(p))
    prior = PriorKnowledge(pk, soft=soft)
    for root in ref_order[:-1]:
        c = int(prior.candidates(alive)[0].sum())
        expected_compared.append(0 if c == 1 else c * (c - 1) // 2 + c * (len(alive) - c))
        alive.remove(root)
    assert off["compared"] == expected_compared
    # Threshold on saves comparisons overall.
    assert sum(runs[0].stats["compared"]) < sum(expected_compared)


# --------------------------------------------------------------------------
# Degenerate data with prior knowledge
# --------------------------------------------------------------------------

def with_copies(base):
    """``base`` plus an exact copy of column 2 (column p) and a scaled copy of 4 (p + 1)."""
    return np.column_stack([base, base[:, 2], -3.0 * base[:, 4] + 1.0])


def degenerate_priors(p):
    """Prior knowledge that puts copies and originals in the same or different statuses."""
    q = p + 2
    pks = []
    # Soft: 2 and 4 exogenous, their copies unknown: the copies are partners
    # of other statuses, collinear with a candidate.
    pk = -np.ones((q, q), dtype=int)
    pk[[2, 4], :] = 0
    pks.append(("soft: copies apart from candidates", pk, True))
    # Soft: 2, 4 and the copy of 2 exogenous: a candidate group of two.
    pk = pk.copy()
    pk[p, :] = 0
    pks.append(("soft: copy with its original", pk, True))
    # Soft: 0 and 1 exogenous; the copies (not their originals) known to have
    # no path from them: V_j partners collinear with "other" partners.
    pk = -np.ones((q, q), dtype=int)
    pk[[0, 1], :] = 0
    pk[p:, [0, 1]] = 0
    pks.append(("soft: copies in V_j", pk, True))
    # Soft: as above and the originals in V_j too: V_j groups of two.
    pk = pk.copy()
    pk[[2, 4], [0, 1]] = 0
    pk[[2, 4], [1, 0]] = 0
    pks.append(("soft: copies and originals in V_j", pk, True))
    # Strong: the copy of 2 must come after 2's original, and 4's copy first.
    pk = -np.ones((q, q), dtype=int)
    pk[p, 2] = 1
    pk[p + 1, :] = 0  # exogenous: before everything
    pk[2, 1] = 0
    pks.append(("strong: copies ordered", pk, False))
    for _, pk, _ in pks:
        np.fill_diagonal(pk, -1)
    return pks


@pytest.mark.parametrize("density, seed", [("sparse", 1141), ("dense", 1142)])
def test_planted_copies_with_prior_knowledge_match_reference(lingam_data, density, seed):
    p = 9
    X = with_copies(lingam_data(p, 500, density, seed)[0])
    for label, pk, soft in degenerate_priors(p):
        kwargs = dict(prior_knowledge=pk, apply_prior_knowledge_softly=soft)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no division by zero, no NaN
            ref_order, ref_explained = reference.causal_order(X, **kwargs)
        assert sorted(ref_order) == list(range(p + 2)), label
        assert len(ref_explained) == 2, label  # each copy leaves, explained
        for threshold in (True, False):
            with pytest.warns(paralingam.DegenerateDataWarning):
                res = paralingam.fit(X, backend="cpu", threshold=threshold, **kwargs)
            assert res.causal_order == ref_order, label
            assert res.stats["explained"] == ref_explained, label
            assert np.isfinite(res.adjacency_matrix).all(), label


# --------------------------------------------------------------------------
# Plumbing to the CUDA engine
# --------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:least squares on the GPU failed")  # the GPU is a stand-in
def test_fit_passes_candidates_to_the_cuda_engine(lingam_data, monkeypatch):
    # No GPU needed: a stand-in engine records what fit passes to it.
    from paralingam.search import _backends, _cuda

    X = lingam_data(5, 300, "sparse", 1151)[0]
    calls = []

    def fake_search(data, **kwargs):
        calls.append(kwargs)
        per_it = {"remaining": [5, 4, 3, 2], "compared": [0] * 4, "gamma": [0.0] * 4,
                  "rounds": [0] * 4, "scores": [0.0] * 4}
        return [0, 1, 2, 3, 4], {}, per_it, 0

    monkeypatch.setattr(_backends, "resolve_backend", lambda name: "cuda")
    monkeypatch.setattr(_cuda, "search", fake_search)
    pk = -np.ones((5, 5))
    pk[2, 4] = 1  # 4 before 2
    paralingam.fit(X, prior_knowledge=pk, apply_prior_knowledge_softly=False)
    paralingam.fit(X)
    with_prior, without = calls
    assert without["candidates"] is None
    is_candidate, in_vj = with_prior["candidates"](np.arange(5))
    assert is_candidate.tolist() == [True, True, False, True, True] and not in_vj.any()


def test_rules_broken_by_an_explained_variable_are_reported():
    # Column 4 = column 1 + column 3 is placed right after the root that
    # completes it (policy), before column 2, which the prior knowledge puts first.
    X = np.random.RandomState(0).uniform(size=(500, 5))
    X[:, 4] = X[:, 1] + X[:, 3]
    pk = -np.ones((5, 5))
    pk[4, 2] = 1  # 2 before 4
    with pytest.warns(paralingam.DegenerateDataWarning, match=r"breaks 1 rule.*: 2 before 4"):
        res = paralingam.fit(X, backend="cpu", prior_knowledge=pk)
    order = res.causal_order
    assert order.index(4) < order.index(2)
    assert res.stats["explained"] == {4: order[order.index(4) - 1]}
    assert res.stats["prior_knowledge_unmet"] == [(2, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "ignore": no warning, the record stays
        quiet = paralingam.fit(X, backend="cpu", prior_knowledge=pk, on_collinear="ignore")
    assert quiet.stats["prior_knowledge_unmet"] == [(2, 4)]
    soft = paralingam.fit(X, backend="cpu", prior_knowledge=pk, on_collinear="ignore",
                          apply_prior_knowledge_softly=True)
    assert "prior_knowledge_unmet" not in soft.stats  # soft rules only choose candidates
    clean = paralingam.fit(np.random.RandomState(0).uniform(size=(500, 5)), backend="cpu",
                           prior_knowledge=pk)
    assert "prior_knowledge_unmet" not in clean.stats


def test_unmet_lists_the_rules_an_order_breaks():
    pk = -np.ones((4, 4))
    pk[1, 0] = 1  # 0 before 1
    pk[2, 3] = 0  # no path 3 -> 2: 2 before 3
    prior = PriorKnowledge(pk)
    assert prior.unmet([0, 1, 2, 3]) == []
    assert prior.unmet([1, 0, 3, 2]) == [(0, 1), (2, 3)]
    assert PriorKnowledge(pk, soft=True).unmet([1, 0, 3, 2]) == []


def test_a_labelled_prior_knowledge_frame_is_matched_to_the_columns():
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(3)
    X = pd.DataFrame(rng.uniform(size=(400, 5)) @ np.triu(rng.uniform(size=(5, 5))),
                     columns=list("abcde"))
    pk = pd.DataFrame(-np.ones((5, 5)), index=list("abcde"), columns=list("abcde"))
    pk.loc["a", "e"] = 1  # e before a: not the unconstrained order
    free = paralingam.fit(X, backend="cpu").causal_order
    res = paralingam.fit(X, backend="cpu", prior_knowledge=pk).causal_order
    assert res.index(4) < res.index(0) and free.index(4) > free.index(0)
    shuffled = pk.loc[list("ecadb"), list("dbeca")]  # the same knowledge
    assert paralingam.fit(X, backend="cpu", prior_knowledge=shuffled).causal_order == res
    positional = pd.DataFrame(pk.to_numpy())  # labels 0..p-1: by position
    assert paralingam.fit(X, backend="cpu", prior_knowledge=positional).causal_order == res
    with pytest.raises(ValueError, match=r"rows must be the data's column names.*\['a'\].*\['z'\]"):
        paralingam.fit(X, backend="cpu", prior_knowledge=pk.rename(index={"a": "z"}))
    with pytest.raises(ValueError, match="columns must be .* each once"):
        paralingam.fit(X, backend="cpu", prior_knowledge=pk.set_axis(list("abcda"), axis=1))
    with pytest.raises(ValueError, match="data have no column names"):
        paralingam.fit(X.to_numpy(), backend="cpu", prior_knowledge=pk)
    assert paralingam.fit(X.to_numpy(), backend="cpu", prior_knowledge=positional,
                          feature_names=None).causal_order == res


def test_the_estimators_match_a_labelled_prior_knowledge_frame_as_fit_does():
    # DirectLiNGAM (fit and bootstrap) and MultiGroupDirectLiNGAM read a
    # labelled DataFrame by label too: a reordered copy is the same knowledge
    # (it was read by position there, silently inverting the rule), and
    # unknown labels are the same error as fit's
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (500, 3))
    X[:, 1] += X[:, 0]
    X[:, 2] += X[:, 1]
    df = pd.DataFrame(X, columns=list("abc"))
    pk = pd.DataFrame(-1, index=list("cba"), columns=list("cba"))
    pk.loc["a", "c"] = 1  # c before a
    expected = paralingam.fit(df, backend="cpu", prior_knowledge=pk).causal_order
    assert expected.index(2) < expected.index(0)
    model = paralingam.DirectLiNGAM(prior_knowledge=pk, backend="cpu").fit(df)
    assert list(model.causal_order_) == list(expected)
    aligned = pk.loc[list("abc"), list("abc")].to_numpy()
    by_position = paralingam.DirectLiNGAM(prior_knowledge=aligned, backend="cpu", random_state=1)
    labelled = paralingam.DirectLiNGAM(prior_knowledge=pk, backend="cpu", random_state=1)
    np.testing.assert_array_equal(labelled.bootstrap(df, 3, progress=False).adjacency_matrices_,
                                  by_position.bootstrap(df, 3, progress=False).adjacency_matrices_)
    unknown = pd.DataFrame(-1, index=list("xyz"), columns=list("xyz"))
    for call in (lambda: paralingam.DirectLiNGAM(prior_knowledge=unknown, backend="cpu").fit(df),
                 lambda: paralingam.DirectLiNGAM(prior_knowledge=unknown, backend="cpu").bootstrap(
                     df, 2, progress=False),
                 lambda: paralingam.MultiGroupDirectLiNGAM(prior_knowledge=unknown,
                                                           backend="cpu").fit([df, df])):
        with pytest.raises(ValueError, match="rows must be the data's column names"):
            call()
    with pytest.raises(ValueError, match="data have no column names"):
        paralingam.DirectLiNGAM(prior_knowledge=pk, backend="cpu").fit(X)
    groups = [df, pd.DataFrame(X[::-1] * 2, columns=list("abc"))]
    multi = paralingam.MultiGroupDirectLiNGAM(prior_knowledge=pk, backend="cpu").fit(groups)
    multi_positional = paralingam.MultiGroupDirectLiNGAM(prior_knowledge=aligned,
                                                         backend="cpu").fit(groups)
    assert multi.causal_order_ == multi_positional.causal_order_
    assert multi.causal_order_.index(2) < multi.causal_order_.index(0)
