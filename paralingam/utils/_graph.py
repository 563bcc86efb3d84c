"""Graph drawings and graph walks of ``paralingam.utils``, computed without lingam.

lingam 1.13 draws these graphs with networkx walks feeding graphviz; here the
walks are numpy ones that visit nodes in the order networkx does (successors
in ascending index order), so that the DOT source is the same text, edge for
edge. Where lingam fills a Python set and then iterates it to emit edges, the
same set is filled in the same order, because a set's iteration order depends
on its insertion history. graphviz is imported when a drawing is made;
matplotlib only for a colour map or to check a colour name.
"""

import numbers

import numpy as np

__all__ = [
    "make_dot_highlight",
    "make_dot_ancestors",
    "make_dot_descendants",
    "make_dot_paths",
    "make_dot_for_nan_probability_matrix",
    "calculate_distance_from_root_nodes",
]

# to_hex("black", keep_alpha=True), lingam's colour of every cluster without a cmap.
_BLACK = "#000000ff"


def _graphviz():
    try:
        import graphviz
    except ImportError:
        raise ImportError("paralingam draws graphs with the graphviz package, which it does "
                          "not install by default: pip install 'paralingam[plot]' "
                          "(or pip install graphviz)") from None
    return graphviz


def _is_int(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)


def _check_int(value, name, low, high=None):
    """``value`` as an int in ``[low, high]`` (no upper bound when ``high`` is None)."""
    if not _is_int(value) or value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}; got {value!r}")
    return int(value)


def _check_path_color(path_color):
    """lingam checks ``path_color`` with matplotlib's ``is_color_like``; without
    matplotlib the name is left to graphviz."""
    if path_color is None:
        return "black"
    try:
        from matplotlib.colors import is_color_like
    except ImportError:
        return path_color
    if not is_color_like(path_color):
        raise ValueError(f"'path_color' should be an color name; got {path_color!r}")
    return path_color


def _check_path(path, n):
    if not isinstance(path, tuple) or len(path) < 2:
        raise TypeError("'path' should be a tuple of node indices.")
    return (_check_int(path[0], "path start", 0, n - 1),
            _check_int(path[1], "path end", 0, n - 1))


def _square(matrix, name, allow_nan=False, min_size=1):
    """``matrix`` as a finite (or NaN where allowed) square float array."""
    try:
        A = np.array(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric matrix: {exc}") from None
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix; got shape {A.shape}")
    if A.shape[0] < min_size:
        raise ValueError(f"{name} must be at least {min_size}x{min_size}; got {A.shape}")
    bad = ~np.isfinite(A) & ~np.isnan(A) if allow_nan else ~np.isfinite(A)
    if bad.any():
        kind = "infinite" if allow_nan else "NaN or infinite"
        raise ValueError(f"{name} has {kind} entries")
    return A


def _bfs_lengths(neighbours, source, cutoff=None):
    """Breadth-first distances from ``source``, as networkx's
    ``single_source_shortest_path_length``: a dict in visiting order.

    ``neighbours[v]`` lists the nodes next to ``v`` in ascending order.
    """
    lengths = {source: 0}
    level_nodes = [source]
    level = 0
    while level_nodes and (cutoff is None or level < cutoff):
        level += 1
        next_nodes = []
        for v in level_nodes:
            for w in neighbours[v]:
                if w not in lengths:
                    lengths[w] = level
                    next_nodes.append(w)
        level_nodes = next_nodes
    return lengths


def _reach(edge, start):
    """Mask of the nodes reachable from ``start`` along ``edge[u, v]``: u -> v."""
    seen = np.zeros(len(edge), dtype=bool)
    seen[start] = True
    stack = [start]
    while stack:
        new = np.flatnonzero(edge[stack.pop()] & ~seen)
        seen[new] = True
        stack.extend(new.tolist())
    return seen


def _topological_order(edge, nodes):
    """The nodes of the mask ``nodes`` in a topological order of ``edge`` (u -> v).

    None when the subgraph on ``nodes`` has a cycle.
    """
    sub = edge & nodes[:, None] & nodes[None, :]
    indegree = sub.sum(axis=0)
    ready = [v for v in np.flatnonzero(nodes) if indegree[v] == 0]
    order = []
    while ready:
        v = ready.pop()
        order.append(v)
        for w in np.flatnonzero(sub[v]):
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return order if len(order) == nodes.sum() else None


def _acyclic(edge, nodes):
    """Whether the subgraph of ``edge`` (u -> v) on the mask ``nodes`` has no cycle."""
    return _topological_order(edge, nodes) is not None


def _simple_paths(edge, source, target):
    """The simple paths ``source -> ... -> target`` of ``edge`` (u -> v), in
    networkx's ``all_simple_paths`` order (depth first, successors ascending).

    Branches that cannot reach ``target`` are cut, which leaves the order of
    the paths unchanged. The number of paths can grow exponentially, as in
    lingam.
    """
    if source == target:
        return [[source]]
    useful = _reach(edge.T, target)
    if not useful[source]:
        return []
    succ = [np.flatnonzero(edge[u] & useful).tolist() for u in range(len(edge))]
    paths = []
    path = [source]
    on_path = {source}
    stack = [iter(succ[source])]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            on_path.discard(path.pop())
        elif child == target:
            paths.append(path + [target])
        elif child not in on_path:
            path.append(child)
            on_path.add(child)
            stack.append(iter(succ[child]))
    return paths


def _simple_path_edges(edge, source, target):
    """The set of edges ``(u, v)`` on some simple path ``source -> target``.

    On an acyclic part of the graph these are the edges from a node reached
    from ``source`` to one reaching ``target``; with cycles the paths are
    listed.
    """
    if source == target:
        return set()
    relevant = _reach(edge, source) & _reach(edge.T, target)
    if not relevant[source]:
        return set()
    if _acyclic(edge, relevant):
        us, vs = np.nonzero(edge & relevant[:, None] & relevant[None, :])
        return set(zip(us.tolist(), vs.tolist()))
    edges = set()
    for path in _simple_paths(edge, source, target):
        edges.update(zip(path, path[1:]))
    return edges


def _cycle_edges(edge):
    """The edges ``(u, v)`` on some simple cycle (networkx's ``simple_cycles``):
    self-loops and the edges inside a strongly connected component."""
    n = len(edge)
    forward = [_reach(edge, v) for v in range(n)]
    out = set()
    for u, v in zip(*np.nonzero(edge)):
        if u == v or forward[v][u]:
            out.add((int(u), int(v)))
    return out


def _path_node_names(path_edges, names):
    nodes = sorted({node for e in path_edges for node in e})
    return [names[node] for node in nodes]


def _add_nodes(dot, names, path=None):
    """Add ``names`` to ``dot``; ``path``: ``(path_nodes, start, end, colour)``, whose
    nodes take the colour and whose two ends a double border (lingam's make_dot)."""
    for name in names:
        kwargs = {}
        if path is not None:
            path_nodes, start, end, colour = path
            if name in path_nodes:
                kwargs.update(fontcolor=colour, color=colour)
            if name == names[start] or name == names[end]:
                kwargs["peripheries"] = "2"
        dot.node(name, **kwargs)


def make_dot_highlight(adjacency_matrix, node_index, labels=None, max_dsc=None, max_anc=None,
                       lower_limit=None, cmap=None, draw_others=True, detect_cycle=False,
                       path=None, path_color=None, vmargin=2, hmargin=2):
    """Draw the ancestors and descendants of one node, level by level.

    lingam 1.13's ``make_dot_highlight``: the target node in the middle, its
    descendants in rows below by distance, its ancestors in rows above, the
    other nodes in a cluster beside; positions are fixed for graphviz's
    ``neato`` engine.

    Parameters
    ----------
    adjacency_matrix : array-like, shape (n_features, n_features)
        ``B[i, j]`` the effect of ``x_j`` on ``x_i``; entries within 1e-8 of
        0 are no edge.
    node_index : int
        The target node.
    labels : sequence of str, optional
        Node names; ``x0, x1, ...`` without.
    max_dsc, max_anc : int, optional
        How many levels of descendants / ancestors to draw (all without).
    lower_limit : float, optional
        Entries with ``|B[i, j]| < lower_limit`` are dropped first.
    cmap : str or matplotlib colormap, optional
        Colours of the levels (needs matplotlib); black without.
    draw_others : bool
        Whether to draw the cluster of the other nodes.
    detect_cycle : bool
        Dash the edges that lie on a cycle.
    path : tuple of int, optional
        ``(start, end)``: thicken the edges on the simple paths between them.
    path_color : str, optional
        Colour of those edges; black without.
    vmargin, hmargin : float
        Vertical and horizontal spacing, at least 1.

    Returns
    -------
    graphviz.Digraph
    """
    # lingam's cluster margins
    cls_margin_l = 1.5
    cls_margin_r = 0.6
    cls_margin_t = 0.6
    cls_margin_b = 0.4
    cls_space_target_other = 0.2

    adj = _square(adjacency_matrix, "adjacency_matrix", min_size=2)
    n = adj.shape[0]
    node_index = _check_int(node_index, "node_index", 0, n - 1)
    if labels is None:
        node_names = [f"x{i}" for i in range(n)]
    else:
        node_names = [str(label) for label in labels]
        if len(node_names) != n:
            raise ValueError(f"labels has {len(node_names)} names for {n} variables")
    if max_dsc is not None:
        max_dsc = _check_int(max_dsc, "max_dsc", 0)
    if max_anc is not None:
        max_anc = _check_int(max_anc, "max_anc", 0)
    if lower_limit is not None and (not isinstance(lower_limit, numbers.Real)
                                    or isinstance(lower_limit, bool)):
        raise TypeError(f"lower_limit must be a number; got {lower_limit!r}")
    for name, value in (("draw_others", draw_others), ("detect_cycle", detect_cycle)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool; got {value!r}")
    path_start = path_end = None
    if path is not None:
        path_start, path_end = _check_path(path, n)
        path_color = _check_path_color(path_color)
    for name, value in (("vmargin", vmargin), ("hmargin", hmargin)):
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value >= 1:
            raise ValueError(f"{name} must be a number >= 1; got {value!r}")

    if lower_limit is not None:
        adj[abs(adj) < lower_limit] = 0
    edge = ~np.isclose(adj, 0)  # edge[i, j]: x_j -> x_i
    succ = [np.flatnonzero(edge[:, v]).tolist() for v in range(n)]
    pred = [np.flatnonzero(edge[v, :]).tolist() for v in range(n)]

    dsc_path_length = _bfs_lengths(succ, node_index, max_dsc)
    del dsc_path_length[node_index]
    anc_path_length = _bfs_lengths(pred, node_index, max_anc)
    del anc_path_length[node_index]

    # Sets filled in lingam's order: the clusters below come in their iteration order.
    dsc_indices = set(dsc_path_length.keys())
    anc_indices = set(anc_path_length.keys())
    isolate_indices = set(np.flatnonzero(~edge.any(axis=0) & ~edge.any(axis=1)).tolist())
    other_indices = (set(np.arange(n)) - dsc_indices - anc_indices - isolate_indices
                     - {node_index})

    clusters = {0: [node_index], None: sorted(other_indices) + sorted(isolate_indices)}
    for node in dsc_indices:
        clusters.setdefault(dsc_path_length[node], []).append(node)
    for node in anc_indices:
        clusters.setdefault(-anc_path_length[node], []).append(node)

    path_edges = None
    if path is not None:
        # (tail, head) pairs; lingam's node highlighting compares indices with
        # names and so never applies, which is kept for equal drawings.
        path_edges = _simple_path_edges(edge.T, path_start, path_end)

    graphviz = _graphviz()
    graph = graphviz.Digraph("graph", engine="neato",
                             graph_attr={"rankdir": "TB", "splines": "true"})

    ds = sorted(d for d in clusters if d is not None)
    if cmap is None:
        cluster_colors = {d: _BLACK for d in ds}
    else:
        try:
            import matplotlib.pyplot as plt
            from matplotlib import colors as mcolors
        except ImportError:
            raise ImportError("make_dot_highlight's cmap needs matplotlib: "
                              "pip install matplotlib") from None
        rgba = plt.get_cmap(cmap)(np.linspace(0, 1, len(ds) + 1))
        cluster_colors = {d: mcolors.to_hex(c, keep_alpha=True) for d, c in zip(ds, rgba)}
    cluster_colors[None] = cluster_colors[0]

    pos_y_map = {0: 0, None: 0}
    for i, dist in enumerate(sorted(d for d in clusters if d is not None and 0 < d)):
        pos_y_map[dist] = -(i + 1) * vmargin
    for i, dist in enumerate(sorted((d for d in clusters if d is not None and d < 0),
                                    key=abs)):
        pos_y_map[dist] = (i + 1) * vmargin

    node_ids = {node: [] for node in range(n)}
    for dist, nodes in clusters.items():
        if (dist is None and not draw_others) or not nodes:
            continue
        if dist == 0:
            cls_label = "target"
            offset_x = 0
        elif dist is None:
            cls_label = "others"
            offset_x = cls_margin_r + cls_margin_l + cls_space_target_other
            nodes = sorted(nodes, key=lambda x: (x in isolate_indices, x in other_indices, x))
        else:
            cls_label = f"ancestor {abs(dist)}" if dist < 0 else f"descendant {abs(dist)}"
            offset_x = 0
            nodes = sorted(nodes)
        pos_y = pos_y_map[dist]
        color = cluster_colors[dist]
        cls_name = f"cluster{dist}"
        cls_attr = {"style": "dashed", "label": cls_label, "labeljust": "l", "color": color}
        with graph.subgraph(name=cls_name, graph_attr=cls_attr) as c:
            for i, node in enumerate(nodes):
                node_id = f"{cls_name}-{node}"
                kwargs = {}
                if path is not None and node in (path_start, path_end):
                    kwargs["peripheries"] = "2"
                c.node(node_id, node_names[node], pos=f"{hmargin * i + offset_x},{pos_y}!",
                       color=color, **kwargs)
                node_ids[int(node)].append((node_id, dist))
            # invisible corners that size the cluster
            c.node(f"{cls_name}-dummy_upper", "",
                   pos=f"{-cls_margin_l + offset_x},{pos_y + cls_margin_t}!",
                   style="invis", fixedsize="true", width="0", height="0")
            x = (len(nodes) - 1) * hmargin + cls_margin_r + offset_x
            c.node(f"{cls_name}-dummy_lower", "", pos=f"{x},{pos_y - cls_margin_b}!",
                   style="invis", fixedsize="true", width="0", height="0")

    cycle_edges = _cycle_edges(edge.T) if detect_cycle else set()
    other_nodes = isolate_indices | other_indices
    for h, t in np.argwhere(edge):
        if not draw_others and (t in other_nodes or h in other_nodes):
            continue
        for tail_id, _ in node_ids[t]:
            for head_id, dist_h in node_ids[h]:
                kwargs = {"color": cluster_colors[dist_h]}
                if path is not None and (t, h) in path_edges:
                    kwargs.update(penwidth="2", fontcolor=path_color, color=path_color)
                if detect_cycle and (t, h) in cycle_edges:
                    kwargs["style"] = "dashed"
                graph.edge(tail_id, head_id, label=f"{adj[h, t]:.2f}", **kwargs)
    return graph


def _probability_matrix(prob_matrix, alpha):
    try:
        P = np.nan_to_num(np.asarray(prob_matrix, dtype=float))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"prob_matrix must be a numeric matrix: {exc}") from None
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError("prob_matrix must be a square 2D array.")
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError("alpha must be in [0, 1].")
    mask = P >= float(alpha)  # mask[j, i]: x_i -> x_j kept
    np.fill_diagonal(mask, False)
    return P, mask


def _indices(values, name, kind, n):
    if values is None:
        raise ValueError(f"{name} is required.")
    if _is_int(values):
        values = [values]
    out = []
    for v in values:
        if not _is_int(v) or not 0 <= v < n:
            raise ValueError(f"{kind} index {v} is out of range [0, {n}).")
        out.append(int(v))
    return out


def _probability_labels(labels, n):
    if labels is None:
        return [f"x{i + 1}" for i in range(n)]  # lingam numbers these from 1
    labels = list(labels)
    if len(labels) != n:
        raise ValueError(f"labels has {len(labels)} names for {n} variables")
    return labels


def _draw_kept(nodes, kept_edges, P, labels, colour_of):
    graph = _graphviz().Digraph(engine="dot")
    if not nodes:
        return graph
    for v in sorted(nodes):
        fill = colour_of(v)
        if fill is None:
            graph.node(labels[v])
        else:
            graph.node(labels[v], style="filled", fillcolor=fill)
    for parent, child in kept_edges:  # set order, as lingam
        graph.edge(labels[parent], labels[child], label=f"{P[child, parent]:.2f}")
    return graph


def _check_depth(value, name):
    if value is not None and (not _is_int(value) or value < 0):
        raise ValueError(f"{name} must be a non-negative int or None; got {value!r}")


def make_dot_ancestors(prob_matrix, response_vars, *, treatment_vars=None, alpha=0.6,
                       labels=None, max_anc=None):
    """Draw the ancestors of some variables in a graph of edge probabilities.

    lingam 1.13's ``make_dot_ancestors``: edges with probability at least
    ``alpha``, walked back from the responses.

    Parameters
    ----------
    prob_matrix : array-like, shape (n_features, n_features)
        ``prob_matrix[j, i]`` the probability of ``x_i -> x_j`` (for example
        ``BootstrapResult.get_probabilities()``); NaN counts as 0.
    response_vars : int or sequence of int
        The variables whose ancestors are drawn (light blue).
    treatment_vars : int or sequence of int, optional
        Drawn light red; their children that are parents of a response are
        drawn light green.
    alpha : float
        In [0, 1]: edges with a smaller probability are left out.
    labels : sequence of str, optional
        Node names; ``x1, x2, ...`` (from 1, as lingam) without.
    max_anc : int, optional
        How many levels of ancestors to walk (all without).

    Returns
    -------
    graphviz.Digraph
    """
    P, mask = _probability_matrix(prob_matrix, alpha)
    n = P.shape[0]
    rvars = _indices(response_vars, "response_vars", "response", n)
    tvars = None if treatment_vars is None else _indices(treatment_vars, "treatment_vars",
                                                         "treatment", n)
    _check_depth(max_anc, "max_anc")

    keep_nodes = set(rvars)
    kept_edges = set()
    frontier = set(rvars)
    depth = 0
    while frontier and (max_anc is None or depth < max_anc):
        nxt = set()
        for cur in frontier:
            for parent in np.flatnonzero(mask[cur, :]).tolist():
                kept_edges.add((parent, cur))
                if parent not in keep_nodes:
                    keep_nodes.add(parent)
                    nxt.add(parent)
        frontier = nxt
        depth += 1

    response_set = set(rvars)
    treatment_set = set()
    green = set()
    if tvars is not None:
        parents = {int(p) for child in rvars for p in np.flatnonzero(mask[child, :])}
        for tv in tvars:
            treatment_set.add(tv)
            green.update(c for c in np.flatnonzero(mask[:, tv]).tolist()
                         if c in parents - response_set - {tv})

    def colour_of(v):
        if v in treatment_set:
            return "lightcoral"
        if v in response_set:
            return "lightblue"
        if v in green:
            return "lightgreen"
        return None

    return _draw_kept(keep_nodes, kept_edges, P, _probability_labels(labels, n), colour_of)


def make_dot_descendants(prob_matrix, treatment_vars, *, alpha=0.6, labels=None, max_dsc=None):
    """Draw the descendants of some variables in a graph of edge probabilities.

    lingam 1.13's ``make_dot_descendants``: edges with probability at least
    ``alpha``, walked forward from the treatments (drawn light red).

    Parameters
    ----------
    prob_matrix : array-like, shape (n_features, n_features)
        ``prob_matrix[j, i]`` the probability of ``x_i -> x_j``; NaN counts as 0.
    treatment_vars : int or sequence of int
    alpha : float
        In [0, 1]: edges with a smaller probability are left out.
    labels : sequence of str, optional
        Node names; ``x1, x2, ...`` (from 1, as lingam) without.
    max_dsc : int, optional
        How many levels of descendants to walk (all without).

    Returns
    -------
    graphviz.Digraph
    """
    P, mask = _probability_matrix(prob_matrix, alpha)
    n = P.shape[0]
    tvars = _indices(treatment_vars, "treatment_vars", "treatment", n)
    _check_depth(max_dsc, "max_dsc")

    keep_nodes = set(tvars)
    kept_edges = set()
    frontier = set(tvars)
    depth = 0
    while frontier and (max_dsc is None or depth < max_dsc):
        nxt = set()
        for cur in frontier:
            for child in np.flatnonzero(mask[:, cur]).tolist():
                kept_edges.add((cur, child))
                if child not in keep_nodes:
                    keep_nodes.add(child)
                    nxt.add(child)
        frontier = nxt
        depth += 1
    treatment_set = set(tvars)
    return _draw_kept(keep_nodes, kept_edges, P, _probability_labels(labels, n),
                      lambda v: "lightcoral" if v in treatment_set else None)


def make_dot_paths(prob_matrix, treatment_var, response_var, *, alpha=0.6, labels=None):
    """Draw every simple directed path between two variables.

    lingam 1.13's ``make_dot_paths``: the paths from ``treatment_var`` (light
    red) to ``response_var`` (light blue) along edges with probability at
    least ``alpha``. Their number can grow exponentially with the variables.

    Parameters
    ----------
    prob_matrix : array-like, shape (n_features, n_features)
        ``prob_matrix[j, i]`` the probability of ``x_i -> x_j``; NaN counts as 0.
    treatment_var, response_var : int or one-element sequence of int
        Different variables.
    alpha : float
        In [0, 1]: edges with a smaller probability are left out.
    labels : sequence of str, optional
        Node names; ``x1, x2, ...`` (from 1, as lingam) without.

    Returns
    -------
    graphviz.Digraph
    """
    P, mask = _probability_matrix(prob_matrix, alpha)
    n = P.shape[0]
    if treatment_var is None or response_var is None:
        raise ValueError("Both treatment_var and response_var are required.")
    tvars = _indices(treatment_var, "treatment_var", "treatment", n)
    rvars = _indices(response_var, "response_var", "response", n)
    if len(tvars) != 1 or len(rvars) != 1:
        raise ValueError("make_dot_paths needs a single treatment_var and a single "
                         "response_var.")
    tv, rv = tvars[0], rvars[0]
    if tv == rv:
        raise ValueError("treatment_var and response_var must be different.")

    keep_nodes = {tv, rv}
    kept_edges = set()
    for path in _simple_paths(mask.T, tv, rv):  # networkx's path order, as lingam
        keep_nodes.update(path)
        kept_edges.update(zip(path[:-1], path[1:]))

    def colour_of(v):
        if v == tv:
            return "lightcoral"
        if v == rv:
            return "lightblue"
        return None

    return _draw_kept(keep_nodes, kept_edges, P, _probability_labels(labels, n), colour_of)


def make_dot_for_nan_probability_matrix(adjacency_matrix, labels=None, lower_limit=0.01,
                                        path=None, path_color=None, ignore_shape=False):
    """Draw a matrix of hidden-common-cause probabilities as double-headed edges.

    lingam 1.13's ``make_dot_for_nan_probability_matrix``: for ``i > j`` an
    edge ``x_j <-> x_i`` labelled with the probability where it exceeds
    ``lower_limit`` and the matrix is symmetric there (the second matrix of
    :func:`paralingam.utils.get_common_edge_probabilities`).

    Parameters
    ----------
    adjacency_matrix : array-like, shape (n_features, n_features)
        The probabilities; NaN counts as 0.
    labels : sequence of str, optional
        Node names; ``x0, x1, ...`` without.
    lower_limit : float
        Probabilities not above it are not drawn.
    path : tuple of int, optional
        ``(start, end)``: highlight the simple paths between them.
    path_color : str, optional
        Their colour; black without.
    ignore_shape : bool
        Accept a matrix that is not square.

    Returns
    -------
    graphviz.Digraph
    """
    try:
        B = np.nan_to_num(np.array(adjacency_matrix, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"adjacency_matrix must be a numeric matrix: {exc}") from None
    if B.ndim != 2 or not np.isfinite(B).all():
        raise ValueError("adjacency_matrix must be a finite 2D matrix")
    if not ignore_shape and B.shape[0] != B.shape[1]:
        raise ValueError("'adjacency_matrix' is not square matrix.")
    if labels is not None and B.shape[1] != len(labels):
        raise ValueError("Length of 'labels' does not match length of 'adjacency_matrix'")
    idx = np.abs(B) > lower_limit
    names = labels if labels else [f"x{i}" for i in range(len(B))]

    path_edges = set()
    path_nodes = []
    if path is not None:
        path_start, path_end = _check_path(path, B.shape[0])
        path_color = _check_path_color(path_color)
        path_edges = _simple_path_edges(_square_edges(idx).T, path_start, path_end)
        path_nodes = _path_node_names(path_edges, names)

    d = _graphviz().Digraph(engine="dot")
    _add_nodes(d, names, None if path is None else (path_nodes, path_start, path_end, path_color))
    for to, frm in zip(*np.nonzero(np.tril(idx))):
        if frm == to or B[frm, to] != B[to, frm]:
            continue
        kwargs = {}
        if (frm, to) in path_edges:
            kwargs.update(penwidth="2", fontcolor=path_color, color=path_color)
        d.edge(names[frm], names[to], dir="both", label=f"{B[to, frm]:.2f}", **kwargs)
    return d


def _square_edges(idx):
    """``idx`` (rows: heads, columns: tails) cut or padded to a square node set."""
    n = idx.shape[0]
    out = np.zeros((n, n), dtype=bool)
    m = min(n, idx.shape[1])
    out[:, :m] = idx[:, :m]
    return out


def calculate_distance_from_root_nodes(adjacency_matrix, max_distance=None):
    """Shortest distances of the variables from the root nodes.

    lingam 1.13's ``calculate_distance_from_root_nodes``: root nodes are the
    rows that sum to 0 (``np.isclose``, NaN counted as 0); each node reached
    from a root gets its smallest number of edges from any root.

    Parameters
    ----------
    adjacency_matrix : array-like, shape (n_features, n_features)
        ``B[i, j]`` non-zero: an edge ``x_j -> x_i``; at least 2x2.
    max_distance : int, optional
        At least 1: leave out nodes further than this.

    Returns
    -------
    dict
        ``{distance: [variable indices]}``, keys in order of first
        appearance over the variables, indices ascending.

    Raises
    ------
    ValueError
        For a matrix that is not square or has no root node.
    """
    B = np.nan_to_num(_square(adjacency_matrix, "adjacency_matrix", allow_nan=True,
                              min_size=2))
    if max_distance is not None:
        max_distance = _check_int(max_distance, "max_distance", 1)
    roots = np.flatnonzero(np.isclose(B.sum(axis=1), 0))
    if len(roots) == 0:
        raise ValueError("adjacency_matrix has no root nodes.")
    n = len(B)
    succ = [np.flatnonzero(B[:, v] != 0).tolist() for v in range(n)]
    best = {}
    for root in roots.tolist():
        for node, dist in _bfs_lengths(succ, root).items():
            if node not in best or dist < best[node]:
                best[node] = dist
    result = {}
    for node in sorted(best):
        if max_distance is None or best[node] <= max_distance:
            result.setdefault(best[node], []).append(node)
    return result
