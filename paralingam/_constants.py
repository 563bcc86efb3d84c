"""The search's constants, read from their one written copy: ``kernels/pl_constants.h``.

The CPU extension and the CUDA kernels include that header; Python parses it
here at import, so each number (the entropy approximation's, the
degenerate-data policy's, the prior-knowledge statuses, ...) has one home.
Names lose their ``PL_`` prefix: ``PL_K1`` is ``K1`` here.
"""

import re
from importlib import resources
from pathlib import Path

HEADER = "pl_constants.h"

_DEFINE = re.compile(r"^#define\s+PL_(\w+)\s+(.*)$")
_ENUM = re.compile(r"^enum\s*\{([^}]*)\}\s*;$")
_MEMBER = re.compile(r"^PL_(\w+)\s*=\s*(-?\d+)$")


def parse(text):
    """Constants of a header in ``pl_constants.h``'s form: ``{name without PL_: value}``.

    ``#define PL_NAME number`` gives a float (an int when written without a
    point or exponent), each ``PL_NAME = int`` of an ``enum { ... };`` line an
    int. The include guard and ``#include`` lines are skipped; anything else
    outside comments raises ``ValueError`` naming the line, so that the
    header cannot hold a value that Python would not see.
    """
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    out = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#ifndef", "#endif", "#include")):
            continue
        if re.fullmatch(r"#define\s+PARALINGAM_\w+_H", line):
            continue
        m = _DEFINE.match(line)
        if m:
            name, value = m.group(1), m.group(2).strip()
            try:
                value = int(value) if re.fullmatch(r"-?\d+", value) else float(value)
            except ValueError:
                raise ValueError(f"{HEADER} line {number}: PL_{name} must be a plain number, "
                                 f"got {value!r}") from None
            out[_new(out, name, number)] = value
            continue
        m = _ENUM.match(line)
        if m:
            for member in filter(None, (x.strip() for x in m.group(1).split(","))):
                mm = _MEMBER.match(member)
                if not mm:
                    raise ValueError(f"{HEADER} line {number}: enum member {member!r} must "
                                     "read PL_NAME = integer")
                out[_new(out, mm.group(1), number)] = int(mm.group(2))
            continue
        raise ValueError(f"{HEADER} line {number}: cannot read {raw.strip()!r}")
    return out


def _new(seen, name, number):
    if name in seen:
        raise ValueError(f"{HEADER} line {number}: PL_{name} is defined twice")
    return name


def kernel_text(name):
    """Text of the file ``name`` of ``kernels/`` (shipped as ``paralingam.kernels``).

    The nearest copy above this module comes first: an installed package's
    ``paralingam/kernels/``, else a source tree's ``kernels/`` (an editable
    install's resource finder may point at another checkout); the lookup
    does not depend on how deep in the package this module lives.
    """
    here = Path(__file__).resolve().parent
    for folder in (here, *here.parents[:3]):
        if (folder / "kernels" / name).is_file():
            return (folder / "kernels" / name).read_text()
    return resources.files("paralingam.kernels").joinpath(name).read_text()


def _load():
    return parse(kernel_text(HEADER))


_VALUES = _load()

# entropy approximation
K1 = _VALUES["K1"]
K2 = _VALUES["K2"]
BETA = _VALUES["BETA"]
H_GAUSS = _VALUES["H_GAUSS"]
LN2 = _VALUES["LN2"]
# prior-knowledge statuses
OTHER = _VALUES["OTHER"]
IN_VJ = _VALUES["IN_VJ"]
CANDIDATE = _VALUES["CANDIDATE"]
# the exact dependence a CUDA search stopped at (on_collinear="error")
DEP_COLLINEAR = _VALUES["DEP_COLLINEAR"]
DEP_EXPLAINED = _VALUES["DEP_EXPLAINED"]
# degenerate-data policy
ROUNDING_MARGIN = _VALUES["ROUNDING_MARGIN"]
STEP_ROUNDING = _VALUES["STEP_ROUNDING"]
MEASURE_SLACK = _VALUES["MEASURE_SLACK"]
VERIFY_BAND = _VALUES["VERIFY_BAND"]
VERIFY_BAND_TOL = _VALUES["VERIFY_BAND_TOL"]
# search
STOP_MARGIN = _VALUES["STOP_MARGIN"]
ORDER_BUCKETS = _VALUES["ORDER_BUCKETS"]
MOMENT_ERR_CPU = _VALUES["MOMENT_ERR_CPU"]
MOMENT_ERR_GPU = _VALUES["MOMENT_ERR_GPU"]
# CUDA search: rows whose double entropies their update computes
HX64_IN_UPDATE_MIN_N = _VALUES["HX64_IN_UPDATE_MIN_N"]
# CUDA search: remaining variables whose covariance update_data updates (one kernel)
FUSED_COV_MAX_R = _VALUES["FUSED_COV_MAX_R"]
FUSED_COV_SMEM = _VALUES["FUSED_COV_SMEM"]
# CUDA search: rows updated in chunks (update_sums, update_rows, update_finish)
UPDATE_SPLIT_MIN_N = _VALUES["UPDATE_SPLIT_MIN_N"]
UPDATE_CHUNK = _VALUES["UPDATE_CHUNK"]
UPDATE_PARTS = _VALUES["UPDATE_PARTS"]
UPDATE_MAX_CHUNKS = _VALUES["UPDATE_MAX_CHUNKS"]
REDO_CHUNK_MIN = _VALUES["REDO_CHUNK_MIN"]  # (a re-decision's pairs split in chunks)
