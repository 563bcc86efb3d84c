"""The causal-order search: the numpy reference, the CPU and CUDA backends.

``reference`` is the plain numpy statement of the search and its
degenerate-data policy (``policy``); ``_cpu`` (OpenMP) and ``_cuda`` with its
host scheduler ``_scheduler`` (kernels in the top-level ``kernels/`` folder)
are the fast backends that reproduce it; ``_backends`` picks one;
``_multi_group`` scores candidates of the multi-group search. See
docs/design/layout.rst for the package map.
"""
