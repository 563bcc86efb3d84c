"""paralingam: ParaLiNGAM, a fast exact DirectLiNGAM, on CPU and GPU.

>>> import paralingam
>>> result = paralingam.fit(X)          # doctest: +SKIP
>>> result.causal_order, result.adjacency_matrix   # doctest: +SKIP
"""

from ._api import DegenerateDataWarning, fit
from ._result import FitResult
from .policy import LinearDependenceError

__version__ = "0.1.0"
__all__ = ["fit", "FitResult", "DegenerateDataWarning", "LinearDependenceError", "__version__"]
