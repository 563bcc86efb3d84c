"""Prior knowledge of the causal order, with lingam 1.13's exact rules.

A prior-knowledge matrix ``pk`` (n_features x n_features) says, for an
ordered pair of variables, what is known about a directed path between them.
The orientation is that of lingam's code (and of the adjacency matrix
``B[i, j]``, the effect of ``j`` on ``i``):

* ``pk[i, j] == 1``: ``x_j`` has a directed path to ``x_i`` (``j`` comes
  before ``i``);
* ``pk[i, j] == 0``: ``x_j`` has no directed path to ``x_i``;
* ``pk[i, j] == -1`` (or NaN): nothing is known.

(lingam's docstring words ``1`` as "``x_i`` has a directed path to ``x_j``";
its code, and ``lingam.utils.make_prior_knowledge``, read ``pk[i, j]`` as
above, which is what paralingam follows.)

DirectLiNGAM uses the matrix in one of two ways, chosen by ``soft``:

**Strong** (``soft=False``). The matrix is turned into partial orders
``(from, to)``: ``pk[i, j] == 1`` gives ``(j, i)``, ``pk[i, j] == 0`` gives
``(i, j)``, except that a pair with ``pk[i, j] == pk[j, i] == 0`` (nothing
has a path to the other) gives no order at all, and ``pk[i, i] == 0`` is
ignored. ``pk[i, j] == pk[j, i] == 1`` (or ``pk[i, i] == 1``) is a
contradiction and raises. At each step only variables that are not the
``to`` of a remaining partial order may become the root; a partial order is
dropped once its ``from`` has left the search (lingam drops it when its
``from`` becomes the root; under paralingam's degenerate-data policy a
variable may also leave as *fully explained*, which then counts the same).
Partial orders that form a cycle can never be satisfied: lingam fails with
an ``argmax`` of an empty sequence; here the constructor raises a
``ValueError`` naming the cycle.

**Soft** (``soft=True``). Among the remaining variables ``U``, the
candidates for the root are the *exogenous* ones (``pk[j, k] == 0`` for every
other ``k`` in ``U``). When there is none, every variable except the
*endogenous* ones (some ``pk[j, k] == 1``) and the *sinks* (``pk[k, j] == 0``
for every other ``k``) is a candidate. A non-candidate ``i`` with
``pk[i, k] == 0`` for every candidate ``k`` is in ``V_j``. For a candidate
``i`` and a partner ``j`` in ``V_j`` the pairwise statistic uses ``x_j``
itself in place of the residual of ``x_j`` on ``x_i``:
``I(i, j) = H(r_i^(j)) - H(x_i)``. "Every ... == 0" is lingam's
``sum() == 0``, in which an unknown (NaN) entry makes the sum NaN, i.e.
unknown entries never count as zeros; "some ... == 1" is its ``nansum() >
0``. If no candidate is left, lingam fails; here ``candidates`` raises a
``ValueError``.

Without prior knowledge every remaining variable is a candidate and ``V_j``
is empty.

Differences from lingam, all in input checking: values other than -1, 0, 1
and NaN are refused (lingam turns every negative value into "unknown" and
treats values such as 0.5 as neither 0 nor 1), NaN is accepted as "unknown"
(lingam's ``check_array`` refuses it), and cyclic strong prior knowledge is
refused up front instead of when the search gets stuck.
"""

import numpy as np

from ._validation import check_bool, check_int

__all__ = ["PriorKnowledge"]


class PriorKnowledge:
    """A validated prior-knowledge matrix and the candidate rule it implies.

    Parameters
    ----------
    matrix : array-like or pandas.DataFrame, shape (n_features, n_features)
        Entries -1 (or NaN: unknown), 0 (no directed path from ``x_j`` to
        ``x_i`` at ``[i, j]``) and 1 (a directed path from ``x_j`` to
        ``x_i``); see the module docstring. A DataFrame is read by position
        here; ``paralingam.fit`` first matches its labels to the data's
        column names.
    n_features : int, optional
        Number of variables of the data, >= 1; the matrix must be square of
        this size. Without it the matrix must be square.
    soft : bool
        Apply the prior knowledge softly (lingam's
        ``apply_prior_knowledge_softly``) instead of as strict partial orders.

    Attributes
    ----------
    matrix : ndarray of float64, shape (n_features, n_features)
        The matrix with every unknown entry as NaN.
    soft : bool
    partial_orders : ndarray of int, shape (n_orders, 2)
        Strong mode: the ``(from, to)`` pairs, sorted; empty in soft mode.

    Raises
    ------
    ValueError
        For ``soft`` other than True or False, ``n_features`` other than
        None or a positive integer, for a matrix that is not
        numeric or not of shape
        ``(n_features, n_features)``, for values other than -1, 0, 1 and NaN
        (the message names the positions), for contradictory directed paths
        (``pk[i, j] == pk[j, i] == 1``, or ``pk[i, i] == 1``) and, in strong
        mode, for partial orders that form a cycle (the messages name the
        pairs).
    """

    def __init__(self, matrix, n_features=None, *, soft=False):
        # bool("False") is True: a string would silently choose soft mode
        self.soft = check_bool("soft", soft)
        self.matrix = _as_matrix(matrix, n_features)
        p = self.matrix.shape[0]
        if self.soft:
            self.partial_orders = np.zeros((0, 2), dtype=np.intp)
        else:
            self.partial_orders = _partial_orders(self.matrix)
            _check_acyclic(self.partial_orders, p)
        self._from = self.partial_orders[:, 0]
        self._to = self.partial_orders[:, 1]

    @property
    def n_features(self):
        """Number of variables."""
        return self.matrix.shape[0]

    def candidates(self, alive):
        """Which remaining variables may be the next root, and which are in ``V_j``.

        Parameters
        ----------
        alive : array-like of int, shape (r,)
            Original indices of the variables still in the search, ascending.

        Returns
        -------
        is_candidate : ndarray of bool, shape (r,)
            ``alive[k]`` may become the root (lingam's ``U_c``).
        in_vj : ndarray of bool, shape (r,)
            ``alive[k]`` is in ``V_j``: a candidate compared with it uses
            ``x_alive[k]`` itself instead of its residual. Always False in
            strong mode, and never True together with ``is_candidate``.

        Raises
        ------
        ValueError
            When no remaining variable can be the root: the prior knowledge
            is inconsistent on these variables.
        """
        alive = np.asarray(alive, dtype=np.intp)
        if self.soft:
            is_candidate, in_vj = self._soft(alive)
        else:
            is_candidate, in_vj = self._strong(alive), np.zeros(len(alive), dtype=bool)
        if len(alive) and not is_candidate.any():
            raise ValueError(
                "the prior knowledge is inconsistent: none of the remaining variables "
                f"{_list(alive.tolist())} can come next under the "
                f"{'soft' if self.soft else 'strong'} rule (in soft mode each one is "
                "endogenous, with some prior_knowledge[j, k] == 1, or a sink, with "
                "prior_knowledge[k, j] == 0 for every other remaining k)")
        return is_candidate, in_vj

    def unmet(self, order):
        """The strong-mode rules ``(from, to)`` that ``order`` breaks (``to`` first).

        The search never breaks one; the degenerate-data policy can, by
        placing a fully explained variable right after the root that
        completed it. Always empty in soft mode, whose rules only choose
        candidates.

        Parameters
        ----------
        order : sequence of int
            A causal order of all ``n_features`` variables.

        Returns
        -------
        list of (int, int)
        """
        position = np.empty(self.n_features, dtype=np.intp)
        position[np.asarray(order, dtype=np.intp)] = np.arange(len(order))
        broken = position[self._from] > position[self._to]
        return [(int(f), int(t)) for f, t in self.partial_orders[broken]]

    def _strong(self, alive):
        # A partial order is still in force while its `from` is in the search;
        # the `to` of one in force cannot be the root.
        in_search = np.zeros(self.n_features, dtype=bool)
        in_search[alive] = True
        blocked = np.zeros(self.n_features, dtype=bool)
        blocked[self._to[in_search[self._from]]] = True
        return ~blocked[alive]

    def _soft(self, alive):
        sub = self.matrix[np.ix_(alive, alive)]
        # Off-diagonal entries only: the diagonal counts as "all zero" and
        # never as "some one", as lingam leaves it out of both tests.
        zero = sub == 0  # NaN (unknown) is never zero: lingam's NaN sums
        np.fill_diagonal(zero, True)
        one = sub == 1
        np.fill_diagonal(one, False)
        exogenous = zero.all(axis=1)  # no remaining variable has a path to it
        if exogenous.any():
            is_candidate = exogenous
        else:
            endogenous = one.any(axis=1)
            sink = zero.all(axis=0)  # it has a path to no remaining variable
            is_candidate = ~(endogenous | sink)
        # V_j: non-candidates to which no candidate has a path.
        in_vj = ~is_candidate & zero[:, is_candidate].all(axis=1)
        return is_candidate, in_vj


def _as_matrix(matrix, n_features):
    """The matrix as float64 with unknown entries as NaN, checked."""
    if n_features is not None:  # "4" would be compared with the shape, and never equal it
        n_features = check_int("n_features", n_features)
    if hasattr(matrix, "to_numpy"):  # pandas DataFrame
        matrix = matrix.to_numpy()
    try:
        pk = np.array(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"prior_knowledge must be a numeric matrix: {exc}") from None
    p = pk.shape[0] if n_features is None and pk.ndim == 2 else n_features
    if pk.ndim != 2 or pk.shape != (p, p):
        want = "square" if n_features is None else f"of shape ({p}, {p}) (n_features, n_features)"
        raise ValueError(f"prior_knowledge must be {want}; got shape {pk.shape}")
    bad = ~(np.isin(pk, (-1.0, 0.0, 1.0)) | np.isnan(pk))
    if bad.any():
        where = [f"[{i}, {j}] = {float(pk[i, j])!r}" for i, j in zip(*np.nonzero(bad))]
        raise ValueError(
            "prior_knowledge entries must be -1 or NaN (unknown), 0 (no directed path) "
            f"or 1 (directed path); invalid at {_list(where)}")
    pk[pk == -1.0] = np.nan
    return pk


def _partial_orders(pk):
    """The strong-mode ``(from, to)`` pairs of ``pk``, sorted (module docstring)."""
    path = pk == 1  # path[i, j]: j before i
    both = path & path.T  # includes a 1 on the diagonal
    if both.any():
        pairs = np.argwhere(both).tolist()
        raise ValueError(
            "the prior knowledge is inconsistent: directed paths in both directions "
            "(prior_knowledge[i, j] == prior_knowledge[j, i] == 1; a 1 on the diagonal "
            f"is a path from a variable to itself) at the following indices: {pairs}")
    no_path = pk == 0  # no_path[i, j]: i before j ...
    no_path &= ~no_path.T  # ... unless also no_path[j, i]: both cancel out
    before = path.T | no_path  # before[f, t]: f before t
    return np.argwhere(before).astype(np.intp)


def _check_acyclic(orders, p):
    """Raise ValueError naming a cycle of the partial orders, if they have one."""
    if len(orders) == 0:
        return
    before = np.zeros((p, p), dtype=bool)
    before[orders[:, 0], orders[:, 1]] = True
    indegree = before.sum(axis=0)
    left = np.ones(p, dtype=bool)
    free = list(np.flatnonzero(indegree == 0))
    while free:  # Kahn's algorithm: peel off variables with no predecessor
        v = free.pop()
        left[v] = False
        succ = np.flatnonzero(before[v])
        indegree[succ] -= 1
        free.extend(succ[indegree[succ] == 0].tolist())
    if not left.any():
        return
    # Every variable left has a predecessor that is left too: walking back
    # from one of them must revisit a variable, which closes a cycle.
    pred = {t: int(np.flatnonzero(before[:, t] & left)[0]) for t in np.flatnonzero(left)}
    seen, v = [], int(np.flatnonzero(left)[0])
    while v not in seen:
        seen.append(v)
        v = pred[v]
    cycle = seen[seen.index(v):][::-1]
    cycle.append(cycle[0])
    raise ValueError(
        "the prior knowledge is inconsistent: its partial orders form a cycle, "
        f"{' -> '.join(map(str, cycle))} (a -> b: a must come before b), so no causal "
        "order can satisfy them")


def _list(items, limit=10):
    shown = ", ".join(map(str, items[:limit]))
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
