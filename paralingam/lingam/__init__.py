"""The lingam-compatible layer: estimators, bootstrap and HSIC tests.

``DirectLiNGAM`` (``estimator``), ``VARLiNGAM``, ``MultiGroupDirectLiNGAM``,
``CausalEffect``, the bootstrap results and the HSIC independence tests, with
lingam 1.13's API, built on :func:`paralingam.fit` and the adjacency step.
The public names are exported from :mod:`paralingam`; lingam's ``utils``
module is :mod:`paralingam.utils`. See docs/design/layout.rst.
"""
