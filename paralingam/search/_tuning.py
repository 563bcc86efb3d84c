"""Launch settings of the CUDA search, kept apart from the model's parameters.

None of them changes the causal order, only the speed; ``paralingam.fit``
takes them as one ``tuning=`` argument (docs/user_guide/gpu.rst).
"""

from collections.abc import Mapping
from dataclasses import dataclass, fields

from .._validation import CUDA_BLOCKS, WARPS_PER_PAIR, check_int

__all__ = ["Tuning", "check_tuning"]


@dataclass(frozen=True)
class Tuning:
    """Block and thread settings of the CUDA order search.

    ``paralingam.fit(X, tuning=Tuning(threads_per_block=512))``, or a dict
    with the same keys: ``tuning={"threads_per_block": 512}``. The CPU
    backend ignores them. None of them changes the causal order.

    Parameters
    ----------
    threads_per_block : int, optional
        Threads per block of the worker kernel (a multiple of 32 up to 1024;
        default 256).
    blocks : int, optional
        Blocks of the persistent worker kernel (default: as many as are
        resident at once, from the device's occupancy).
    warps_per_pair : {1, 2, 4, 8, 16, 32}, optional
        Warps that compare one pair together, dividing the block's warps
        (default: 1 below 2048 samples, 2 below 4096, else 4).
    """

    threads_per_block: int = None
    blocks: int = None
    warps_per_pair: int = None

    def __post_init__(self):
        # Checked here, so a bad Tuning fails where it is made, naming the setting.
        if self.threads_per_block is not None:
            object.__setattr__(self, "threads_per_block",
                               check_int("threads_per_block", self.threads_per_block, CUDA_BLOCKS))
        if self.blocks is not None:
            object.__setattr__(self, "blocks", check_int("blocks", self.blocks))
        if self.warps_per_pair is not None:
            object.__setattr__(self, "warps_per_pair",
                               check_int("warps_per_pair", self.warps_per_pair, WARPS_PER_PAIR))


_KEYS = tuple(f.name for f in fields(Tuning))


def check_tuning(tuning):
    """``tuning`` (None, a :class:`Tuning` or a mapping of its fields) as a Tuning.

    Raises
    ------
    ValueError
        Naming an unknown key, a bad value or a value of the wrong type.
    """
    if tuning is None:
        return Tuning()
    if isinstance(tuning, Tuning):
        return tuning
    if isinstance(tuning, Mapping):
        unknown = [k for k in tuning if k not in _KEYS]
        if unknown:
            raise ValueError(f"tuning has unknown keys {unknown}; the settings are {list(_KEYS)}")
        return Tuning(**tuning)
    raise ValueError(f"tuning must be None, a paralingam.Tuning or a dict with keys "
                     f"{list(_KEYS)}; got {tuning!r}")
