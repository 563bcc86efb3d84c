"""A small ``lingam.utils`` look-alike, so that lingam's tutorials run on paralingam.

With ``import paralingam as lingam``, ``lingam.utils.make_dot``,
``make_prior_knowledge``, ``print_causal_directions``, ``print_dagc``,
``find_all_paths``, ``calculate_total_effect``, ``get_sink_variables`` and
``get_exo_variables`` behave as lingam 1.13's. Only numpy is imported here;
graphviz is imported when :func:`make_dot` is called.
"""

import numbers

import numpy as np

from .bootstrap import find_all_paths

__all__ = [
    "make_dot",
    "make_prior_knowledge",
    "print_causal_directions",
    "print_dagc",
    "find_all_paths",
    "calculate_total_effect",
    "get_sink_variables",
    "get_exo_variables",
]

# make_dot options that only lingam's own make_dot draws.
_LINGAM_DOT_OPTIONS = (
    "prediction_feature_indices", "prediction_target_label", "prediction_line_color",
    "prediction_coefs", "prediction_feature_importance", "path", "path_color",
    "detect_cycle", "ignore_shape",
)
# Those of them that change the drawing when set.
_LINGAM_ONLY_DOT_OPTIONS = ("prediction_feature_indices", "path", "detect_cycle", "ignore_shape")


def print_causal_directions(cdc, n_sampling, labels=None):
    """Print the edge counts of ``BootstrapResult.get_causal_direction_counts``.

    One line per edge, ``"x1 <--- x0 (b>0) (95.0%)"``, as lingam prints them.

    Parameters
    ----------
    cdc : dict
        The counts, as returned by ``get_causal_direction_counts``.
    n_sampling : int
        Number of resamples (the percentages' denominator).
    labels : sequence of str, optional
        Variable names; ``x0, x1, ...`` without.
    """
    for k, (frm, to, count) in enumerate(zip(cdc["from"], cdc["to"], cdc["count"])):
        sign = _sign_text(cdc["sign"][k]) if "sign" in cdc else ""
        print(f"{_label(labels, to)} <--- {_label(labels, frm)} {sign} "
              f"({100 * count / n_sampling:.1f}%)")


def print_dagc(dagc, n_sampling, labels=None):
    """Print the graph counts of ``BootstrapResult.get_directed_acyclic_graph_counts``.

    Parameters
    ----------
    dagc : dict
        The counts, as returned by ``get_directed_acyclic_graph_counts``.
    n_sampling : int
        Number of resamples (the percentages' denominator).
    labels : sequence of str, optional
        Variable names; ``x0, x1, ...`` without.
    """
    for k, (dag, count) in enumerate(zip(dagc["dag"], dagc["count"])):
        print(f"DAG[{k}]: {100 * count / n_sampling:.1f}%")
        for e, (frm, to) in enumerate(zip(dag["from"], dag["to"])):
            sign = _sign_text(dag["sign"][e]) if "sign" in dag else ""
            print(f"\t{_label(labels, to)} <--- {_label(labels, frm)} {sign}")


def _sign_text(sign):
    return "(b>0)" if sign > 0 else "(b<0)"


def _label(labels, i):
    return labels[i] if labels else f"x{i}"


def make_prior_knowledge(n_variables, exogenous_variables=None, sink_variables=None,
                         paths=None, no_paths=None):
    """Build lingam's prior-knowledge matrix.

    Parameters
    ----------
    n_variables : int
    exogenous_variables : sequence of int, optional
        Variables with no parents (their rows are 0).
    sink_variables : sequence of int, optional
        Variables with no children (their columns are 0).
    paths : sequence of (int, int), optional
        ``(i, j)``: ``x_i`` has a directed path to ``x_j`` (entry ``[j, i] = 1``).
    no_paths : sequence of (int, int), optional
        ``(i, j)``: ``x_i`` has no directed path to ``x_j`` (entry ``[j, i] = 0``).

    Returns
    -------
    ndarray of int, shape (n_variables, n_variables)
        ``-1`` unknown, ``0`` no path, ``1`` path; ``-1`` on the diagonal.
        Later kinds override earlier ones in the order no_paths, paths,
        sink_variables, exogenous_variables, as in lingam.
    """
    pk = np.full((n_variables, n_variables), -1)
    for frm, to in no_paths or ():
        pk[to, frm] = 0
    for frm, to in paths or ():
        pk[to, frm] = 1
    for var in sink_variables or ():
        pk[:, var] = 0
    for var in exogenous_variables or ():
        pk[var, :] = 0
    np.fill_diagonal(pk, -1)
    return pk


def calculate_total_effect(adjacency_matrix, from_index, to_index, is_continuous=None):
    """Total effect of one variable on another: the sum over directed paths.

    The sum over the directed paths of the products of their edge weights
    (lingam's definition), computed without listing the paths, whose number
    grows exponentially with the variables (a dense DAG of 20 variables has
    2**18 paths between its first and last): in a DAG it is the entry
    ``[to_index, from_index]`` of ``(I - B)^{-1}``, here one forward
    substitution over the variables between the two in a topological order.

    Parameters
    ----------
    adjacency_matrix : array-like, shape (n_features, n_features)
        ``B[i, j]`` the direct effect of ``x_j`` on ``x_i``; zero and NaN
        entries are no edge.
    from_index, to_index : int
    is_continuous : sequence of bool, optional
        Whether each variable is continuous; every variable on a path after
        its start must be.

    Returns
    -------
    float
        Sum over the directed paths of the products of their edge weights.

    Raises
    ------
    ValueError
        As lingam: for a matrix that is not square, indices out of range or
        equal, a discrete variable on a path, or a cycle reachable from
        ``from_index`` before ``to_index``.
    """
    B = np.asarray(adjacency_matrix, dtype=np.float64)
    if B.ndim != 2 or B.shape[0] != B.shape[1]:
        raise ValueError(f"adjacency_matrix must be a square matrix; got shape {B.shape}")
    p = B.shape[0]
    for name, value in (("from_index", from_index), ("to_index", to_index)):
        if not isinstance(value, (numbers.Integral, np.integer)) or not 0 <= value < p:
            raise ValueError(f"{name} must be an integer in [0, {p - 1}]; got {value!r}")
    if from_index == to_index:
        raise ValueError("from_index and to_index mustn't be the same.")
    W = np.where(np.isnan(B), 0.0, B)  # NaN is no edge (lingam's nan_to_num)
    edge = W != 0.0  # edge[i, j]: j -> i
    # Paths end at to_index: its own edges are never followed (lingam's search
    # does not go on from it, so a cycle through it is not an error).
    edge[:, to_index] = False
    reached = _reachable(edge, from_index)
    order = _topological(edge, reached)
    if order is None:  # lingam's path search would go round the cycle
        raise ValueError("Unable to find the path because a cyclic graph has been specified.")
    if not reached[to_index]:
        return 0.0
    if is_continuous is not None:
        # the variables on some path: reached from from_index, reaching to_index
        on_path = reached & _reachable(edge.T, to_index)
        on_path[from_index] = False
        if not all(is_continuous[v] for v in np.flatnonzero(on_path)):
            raise ValueError("Variables on the path must be continuous variables.")
    # effect[v]: the sum over paths from from_index to v, in topological order
    effect = np.zeros(p)
    effect[from_index] = 1.0
    for v in order:
        if v != from_index:
            parents = np.flatnonzero(edge[v] & reached)
            effect[v] = W[v, parents] @ effect[parents]
    return float(effect[to_index])


def _reachable(edge, start):
    """Variables reachable from ``start`` (itself included) along ``edge[i, j]``: j -> i."""
    seen = np.zeros(len(edge), dtype=bool)
    seen[start] = True
    stack = [start]
    while stack:
        new = np.flatnonzero(edge[:, stack.pop()] & ~seen)
        seen[new] = True
        stack.extend(new.tolist())
    return seen


def _topological(edge, nodes):
    """The ``nodes`` (a mask) in a topological order of ``edge``, or None on a cycle."""
    sub = edge & nodes[:, None] & nodes[None, :]
    indegree = sub.sum(axis=1)
    ready = [v for v in np.flatnonzero(nodes) if indegree[v] == 0]
    order = []
    while ready:
        v = ready.pop()
        order.append(v)
        for child in np.flatnonzero(sub[:, v]):
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return order if len(order) == nodes.sum() else None


def get_sink_variables(adjacency_matrix):
    """Indices of the variables without children (zero columns off the diagonal)."""
    B = np.abs(np.array(adjacency_matrix, dtype=np.float64))
    np.fill_diagonal(B, 0)
    return [i for i in range(B.shape[1]) if B[:, i].sum() == 0]


def get_exo_variables(adjacency_matrix):
    """Indices of the variables without parents (zero rows off the diagonal)."""
    B = np.abs(np.array(adjacency_matrix, dtype=np.float64))
    np.fill_diagonal(B, 0)
    return [i for i in range(B.shape[1]) if B[i, :].sum() == 0]


def make_dot(adjacency_matrix, labels=None, lower_limit=0.01, **options):
    """The graph of an adjacency matrix as a ``graphviz.Digraph``.

    Draws an edge ``j -> i`` labelled with ``B[i, j]`` (two decimals) where
    ``|B[i, j]| > lower_limit``, and a double-headed edge where ``B[i, j]``
    (lower triangle) is NaN, like lingam's ``make_dot``. lingam's further
    options (``prediction_feature_indices`` and its companions, ``path``,
    ``path_color``, ``detect_cycle``, ``ignore_shape``) are passed to lingam's
    own ``make_dot`` when lingam is installed.

    Parameters
    ----------
    adjacency_matrix : array-like, shape (n_features, n_features)
    labels : sequence of str, optional
        Node names; ``x0, x1, ...`` without.
    lower_limit : float
        Edges with ``|weight| <= lower_limit`` are not drawn.

    Returns
    -------
    graphviz.Digraph
    """
    unknown = sorted(set(options) - set(_LINGAM_DOT_OPTIONS))
    if unknown:
        raise TypeError(f"make_dot got unexpected keyword arguments {unknown}")
    if any(options.get(key) is not None and options.get(key) is not False
           for key in _LINGAM_ONLY_DOT_OPTIONS):
        try:
            from lingam.utils import make_dot as lingam_make_dot
        except ImportError as exc:
            raise NotImplementedError(
                f"make_dot options {sorted(options)} need lingam's make_dot "
                f"(pip install lingam): {exc}") from exc
        return lingam_make_dot(adjacency_matrix, labels=labels, lower_limit=lower_limit,
                               **options)
    try:
        import graphviz
    except ImportError:
        raise ImportError("make_dot draws with the graphviz package, which paralingam does "
                          "not install by default: pip install 'paralingam[plot]' "
                          "(or pip install graphviz)") from None

    raw = np.asarray(adjacency_matrix, dtype=np.float64)
    if raw.ndim != 2 or raw.shape[0] != raw.shape[1]:
        raise ValueError(f"'adjacency_matrix' is not square matrix (shape {raw.shape}).")
    if labels is not None and len(labels) != raw.shape[1]:
        raise ValueError("Length of 'labels' does not match length of 'adjacency_matrix'")
    B = np.nan_to_num(raw)
    names = list(labels) if labels else [f"x{i}" for i in range(len(B))]

    dot = graphviz.Digraph(engine="dot")
    for name in names:
        dot.node(name)
    present = np.abs(B) > lower_limit
    for to, frm in zip(*np.nonzero(present)):
        dot.edge(names[frm], names[to], label=f"{B[to, frm]:.2f}")
    unknown_to, unknown_from = np.nonzero(np.isnan(np.tril(raw)))
    with dot.subgraph() as same_rank:
        same_rank.attr(rank="same")
        for node in sorted(set(unknown_to.tolist()) | set(unknown_from.tolist())):
            same_rank.node(names[node])
    for to, frm in zip(unknown_to, unknown_from):
        dot.edge(names[frm], names[to], dir="both")
    return dot
