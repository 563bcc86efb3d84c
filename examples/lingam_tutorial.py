"""lingam's DirectLiNGAM tutorial, run on lingam or, unchanged, on paralingam.

The flow of lingam's DirectLiNGAM tutorial (lingam 1.13 documentation): a
6-variable DataFrame, ``fit``, ``causal_order_``, ``adjacency_matrix_``,
``get_error_independence_p_values``, ``bootstrap`` with 100 resamples and the
analyses of its result, ``estimate_total_effect`` and ``get_paths``. The code
below is written against ``lingam``'s API; the switch only changes the import::

    python examples/lingam_tutorial.py               # import lingam
    python examples/lingam_tutorial.py --paralingam  # import paralingam as lingam
    PARALINGAM_AS_LINGAM=1 python examples/lingam_tutorial.py

Graphs are rendered to PNG files (``--render-dir``, default a new temporary
folder) only when graphviz's ``dot`` program is installed; their DOT source is
printed either way. The tutorial's matplotlib histogram is left out.
"""

import argparse
import os
import shutil
import sys
import tempfile


def import_lingam(use_paralingam):
    """``lingam``, or ``paralingam`` standing in for it."""
    if use_paralingam:
        import paralingam as lingam
    else:
        import lingam
    return lingam


def make_data():
    """The tutorial's data: six variables with uniform noise, seed 100."""
    import numpy as np
    import pandas as pd

    np.random.seed(100)
    x3 = np.random.uniform(size=1000)
    x0 = 3.0 * x3 + np.random.uniform(size=1000)
    x2 = 6.0 * x3 + np.random.uniform(size=1000)
    x1 = 3.0 * x0 + 2.0 * x2 + np.random.uniform(size=1000)
    x5 = 4.0 * x0 + np.random.uniform(size=1000)
    x4 = 8.0 * x0 - 1.0 * x2 + np.random.uniform(size=1000)
    return pd.DataFrame(np.array([x0, x1, x2, x3, x4, x5]).T,
                        columns=["x0", "x1", "x2", "x3", "x4", "x5"])


def run(lingam, n_sampling=100, render_dir=None):
    """Run the tutorial with the module ``lingam``; print as it goes.

    Parameters
    ----------
    lingam : module
        ``lingam`` or ``paralingam``.
    n_sampling : int
        Bootstrap resamples (the tutorial's 100).
    render_dir : str, optional
        Folder for the PNG graphs; None renders nothing.

    Returns
    -------
    dict
        The results, by name, for comparing two runs.
    """
    import numpy as np
    import pandas as pd

    np.set_printoptions(precision=3, suppress=True)
    make_dot = lingam.utils.make_dot
    print_causal_directions = lingam.utils.print_causal_directions
    print_dagc = lingam.utils.print_dagc
    out = {}

    def show_graph(name, dot):
        print(dot.source)
        if render_dir is not None:
            print("rendered:", dot.render(os.path.join(render_dir, name), format="png"))

    X = make_data()
    print(X.head())

    m = np.array([[0.0, 0.0, 0.0, 3.0, 0.0, 0.0],
                  [3.0, 0.0, 2.0, 0.0, 0.0, 0.0],
                  [0.0, 0.0, 0.0, 6.0, 0.0, 0.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                  [8.0, 0.0, -1.0, 0.0, 0.0, 0.0],
                  [4.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    show_graph("true_graph", make_dot(m))

    # Causal discovery
    model = lingam.DirectLiNGAM()
    model.fit(X)
    print(model.causal_order_)
    print(model.adjacency_matrix_)
    show_graph("estimated_graph", make_dot(model.adjacency_matrix_))
    out["causal_order"] = [int(i) for i in model.causal_order_]
    out["adjacency_matrix"] = model.adjacency_matrix_

    # Independence between error variables
    p_values = model.get_error_independence_p_values(X)
    print(p_values)
    out["p_values"] = p_values

    # Total effect of x3 on x1
    effect = model.estimate_total_effect(X, 3, 1)
    print(effect)
    out["total_effect_3_1"] = effect

    # Bootstrapping
    model = lingam.DirectLiNGAM()
    result = model.bootstrap(X, n_sampling=n_sampling)

    cdc = result.get_causal_direction_counts(
        n_directions=8, min_causal_effect=0.01, split_by_causal_effect_sign=True)
    print_causal_directions(cdc, n_sampling)
    out["causal_direction_counts"] = cdc

    dagc = result.get_directed_acyclic_graph_counts(
        n_dags=3, min_causal_effect=0.01, split_by_causal_effect_sign=True)
    print_dagc(dagc, n_sampling)
    out["dag_counts"] = dagc

    prob = result.get_probabilities(min_causal_effect=0.01)
    print(prob)
    out["probabilities"] = prob

    causal_effects = result.get_total_causal_effects(min_causal_effect=0.01)
    df = pd.DataFrame(causal_effects)
    labels = [f"x{i}" for i in range(X.shape[1])]
    df["from"] = df["from"].apply(lambda x: labels[x])
    df["to"] = df["to"].apply(lambda x: labels[x])
    print(df)
    print(df.sort_values("effect", ascending=False).head())
    print(df.sort_values("probability", ascending=True).head())
    print(df[df["to"] == "x1"].head())
    out["total_causal_effects"] = causal_effects

    # Total effects of x3 on x0 over the resamples (the tutorial plots their histogram)
    from_index, to_index = 3, 0
    print(f"median total effect of x3 on x0: "
          f"{np.median(result.total_effects_[:, to_index, from_index]):.6f}")
    out["total_effects"] = result.total_effects_

    from_index, to_index = 3, 1
    paths = result.get_paths(from_index, to_index)
    print(pd.DataFrame(paths))
    out["paths"] = paths
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paralingam", action="store_true",
                        help="import paralingam as lingam (also PARALINGAM_AS_LINGAM=1)")
    parser.add_argument("--n-sampling", type=int, default=100, help="bootstrap resamples")
    parser.add_argument("--render-dir", default=None,
                        help="folder for PNG graphs (needs graphviz's dot; default: a temp folder)")
    args = parser.parse_args(argv)
    use_paralingam = args.paralingam or os.environ.get("PARALINGAM_AS_LINGAM") == "1"
    lingam = import_lingam(use_paralingam)
    print(f"# running lingam's DirectLiNGAM tutorial with {lingam.__name__} {lingam.__version__}")

    render_dir = None
    if shutil.which("dot"):
        render_dir = args.render_dir or tempfile.mkdtemp(prefix="lingam_tutorial_")
        os.makedirs(render_dir, exist_ok=True)
    else:
        print("# graphviz's dot program is not installed: graphs are printed, not rendered",
              file=sys.stderr)
    run(lingam, n_sampling=args.n_sampling, render_dir=render_dir)


if __name__ == "__main__":
    main()
