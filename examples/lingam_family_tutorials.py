"""lingam's VARLiNGAM and MultiGroupDirectLiNGAM tutorials, on lingam or, unchanged, on paralingam.

The flow of lingam's ``VARLiNGAM`` and ``MultiGroupDirectLiNGAM`` notebooks
(lingam 1.13 examples): fit, ``causal_order_``, ``adjacency_matrices_``,
``make_dot``, ``bootstrap`` and the analyses of its results. The VAR
tutorial's data file is replaced by a series simulated from the tutorial's
``B0`` and ``B1``. The code is written against lingam's API; only the import
changes::

    python examples/lingam_family_tutorials.py               # import lingam
    python examples/lingam_family_tutorials.py --paralingam  # import paralingam as lingam
"""

import argparse


def import_lingam(use_paralingam):
    if use_paralingam:
        import paralingam as lingam
    else:
        import lingam
    return lingam


def utils_of(lingam):
    utils = lingam.utils
    return utils.make_dot, utils.print_causal_directions, utils.print_dagc


def var_data(n=1000):
    """A series from the VAR tutorial's B0, B1 (uniform noise, seed 0)."""
    import numpy as np
    import pandas as pd

    np.random.seed(0)
    B0 = np.array([[0, -0.12, 0, 0, 0], [0, 0, 0, 0, 0], [-0.41, 0.01, 0, -0.02, 0],
                   [0.04, -0.22, 0, 0, 0], [0.15, 0, -0.03, 0, 0]])
    B1 = np.array([[-0.32, 0, 0.12, 0.32, 0], [0, -0.35, -0.1, -0.46, 0.4], [0, 0, 0.37, 0, 0.46],
                   [-0.38, -0.1, -0.24, 0, -0.13], [0, 0, 0, 0, 0]])
    inv = np.linalg.inv(np.eye(5) - B0)
    X = np.zeros((n + 100, 5))
    for t in range(1, n + 100):
        X[t] = inv @ (B1 @ X[t - 1] + np.random.uniform(-0.5, 0.5, 5))
    return pd.DataFrame(X[100:], columns=[f"x{i}" for i in range(5)])


def run_var(lingam, n_sampling=100):
    """The VARLiNGAM tutorial; returns its values."""
    import numpy as np

    # the tutorials' ``from lingam.utils import make_dot, print_causal_directions, print_dagc``
    make_dot, print_causal_directions, print_dagc = utils_of(lingam)
    X = var_data()
    model = lingam.VARLiNGAM()
    model.fit(X)
    print([int(i) for i in model.causal_order_])
    with np.printoptions(precision=3, suppress=True):
        print(model.adjacency_matrices_[0])
        print(model.adjacency_matrices_[1])
    labels = ['x0(t)', 'x1(t)', 'x2(t)', 'x3(t)', 'x4(t)',
              'x0(t-1)', 'x1(t-1)', 'x2(t-1)', 'x3(t-1)', 'x4(t-1)']
    dot = make_dot(np.hstack(model.adjacency_matrices_), ignore_shape=True, lower_limit=0.05,
                   labels=labels)
    print(dot.source)
    p_values = model.get_error_independence_p_values()

    np.random.seed(0)
    model = lingam.VARLiNGAM()
    result = model.bootstrap(X, n_sampling)
    cdc = result.get_causal_direction_counts(n_directions=8, min_causal_effect=0.3,
                                             split_by_causal_effect_sign=True)
    print_causal_directions(cdc, n_sampling, labels=labels)
    dagc = result.get_directed_acyclic_graph_counts(n_dags=3, min_causal_effect=0.2,
                                                    split_by_causal_effect_sign=True)
    print_dagc(dagc, n_sampling, labels=labels)
    prob = result.get_probabilities(min_causal_effect=0.1)
    with np.printoptions(precision=3, suppress=True):
        print('Probability of B0:\n', prob[0])
        print('Probability of B1:\n', prob[1])
    causal_effects = result.get_total_causal_effects(min_causal_effect=0.01)
    paths = result.get_paths(1, 2, from_lag=1, to_lag=0)
    return {"causal_order": [int(i) for i in model.causal_order_], "p_values": p_values,
            "adjacency_matrices": np.array(result.adjacency_matrices_),
            "causal_direction_counts": cdc, "dag_counts": dagc,
            "total_effects": causal_effects, "paths": paths}


def run_multi_group(lingam, n_sampling=100):
    """The MultiGroupDirectLiNGAM tutorial; returns its values."""
    import numpy as np
    import pandas as pd

    # the tutorials' ``from lingam.utils import make_dot, print_causal_directions, print_dagc``
    make_dot, print_causal_directions, print_dagc = utils_of(lingam)
    np.random.seed(0)
    frames = []
    for a in (3.0, 3.5):
        x3 = np.random.uniform(size=1000)
        x0 = a * x3 + np.random.uniform(size=1000)
        x2 = (a + 3) * x3 + np.random.uniform(size=1000)
        x1 = a * x0 + (a - 1) * x2 + np.random.uniform(size=1000)
        x5 = (a + 1) * x0 + np.random.uniform(size=1000)
        x4 = (a + 5) * x0 - (a - 2) * x2 + np.random.uniform(size=1000)
        frames.append(pd.DataFrame(np.array([x0, x1, x2, x3, x4, x5]).T,
                                   columns=['x0', 'x1', 'x2', 'x3', 'x4', 'x5']))
    X_list = frames
    model = lingam.MultiGroupDirectLiNGAM()
    model.fit(X_list)
    print([int(i) for i in model.causal_order_])
    with np.printoptions(precision=3, suppress=True):
        print(model.adjacency_matrices_[0])
        print(model.adjacency_matrices_[1])
    print(make_dot(model.adjacency_matrices_[0]).source)
    p_values = model.get_error_independence_p_values(X_list)
    results = model.bootstrap(X_list, n_sampling=n_sampling)
    cdc = results[0].get_causal_direction_counts(n_directions=8, min_causal_effect=0.01,
                                                 split_by_causal_effect_sign=True)
    print_causal_directions(cdc, n_sampling)
    dagc = results[1].get_directed_acyclic_graph_counts(n_dags=3, min_causal_effect=0.01,
                                                        split_by_causal_effect_sign=True)
    print_dagc(dagc, n_sampling)
    with np.printoptions(precision=3, suppress=True):
        print(results[0].get_probabilities(min_causal_effect=0.01))
    effects = results[0].get_total_causal_effects(min_causal_effect=0.01)
    paths = results[0].get_paths(3, 1)
    total = model.estimate_total_effect(X_list, 3, 1)
    return {"causal_order": [int(i) for i in model.causal_order_], "p_values": p_values,
            "adjacency_matrices": np.array(model.adjacency_matrices_),
            "causal_direction_counts": cdc, "dag_counts": dagc, "total_effects": effects,
            "paths": paths, "total_effect_3_1": total}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paralingam", action="store_true",
                        help="import paralingam as lingam")
    parser.add_argument("--n-sampling", type=int, default=100)
    args = parser.parse_args()
    lingam = import_lingam(args.paralingam)
    run_var(lingam, args.n_sampling)
    run_multi_group(lingam, args.n_sampling)


if __name__ == "__main__":
    main()
