"""paralingam: ParaLiNGAM, a fast exact DirectLiNGAM, on CPU and GPU.

>>> import paralingam
>>> result = paralingam.fit(X)          # doctest: +SKIP
>>> result.causal_order, result.adjacency_matrix   # doctest: +SKIP

``paralingam.DirectLiNGAM`` is a scikit-learn estimator with lingam's API:

>>> import paralingam as lingam         # doctest: +SKIP
>>> model = lingam.DirectLiNGAM().fit(X)   # doctest: +SKIP
"""

from . import utils
from ._api import DegenerateDataWarning, fit
from ._memory import InsufficientMemoryError
from ._result import FitResult
from ._version import __version__
from .search._tuning import Tuning
from .search.policy import LinearDependenceError

__all__ = [
    "fit",
    "FitResult",
    "DegenerateDataWarning",
    "LinearDependenceError",
    "InsufficientMemoryError",
    "Tuning",
    "DirectLiNGAM",
    "BootstrapResult",
    "VARLiNGAM",
    "VARBootstrapResult",
    "MultiGroupDirectLiNGAM",
    "CausalEffect",
    "utils",
    "__version__",
]

# The estimator needs scikit-learn (and scipy), which take about a second to
# import: load them on first use, not at ``import paralingam``.
_LAZY = {
    "DirectLiNGAM": "lingam.estimator",
    "BootstrapResult": "lingam.bootstrap",
    "VARLiNGAM": "lingam.var_lingam",
    "VARBootstrapResult": "lingam.var_lingam",
    "MultiGroupDirectLiNGAM": "lingam.multi_group",
    "CausalEffect": "lingam.causal_effect",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
