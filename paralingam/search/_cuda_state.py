"""The CUDA search state's layout, read from its one written copy: ``kernels/search_state.h``.

The kernels read the ``PlSearch`` struct of that header. Each buffer's
comment there starts with its extent in brackets (``[p x p]``, ``[p + 1]``,
...) and the flags of a search over several devices; this module parses the
struct at import, as :mod:`paralingam._constants` parses ``pl_constants.h``,
and derives from it everything the host needs to know about the layout:

* :func:`allocations`: the device buffers of a search, which
  ``_cuda._Workspace`` allocates;
* :func:`device_bytes` and :func:`replica_bytes`: the memory they take,
  checked before anything is allocated;
* :func:`pack`: the struct's bytes, filled from the buffers' addresses and
  the search's settings, which ``_scheduler.fill_search`` uploads.

A buffer is added by declaring it in the header with its extent; the
allocation, the memory formula and the fill follow. ``tests/test_cuda_state.py``
compiles the header with the C compiler and checks every field's offset and
type against what is parsed here.
"""

import re
import struct
from typing import NamedTuple

import numpy as np

from .. import _constants

HEADER = "search_state.h"

# What a buffer's extent counts, per search of p variables and row stride ld
# ("p x chunks": chunk_parts(ld) per variable).
EXTENTS = ("p x ld", "p x p", "p + 1", "p x chunks", "control", "host")
# "float": allocated in full only for float comparisons (a placeholder
# otherwise); "device 0": held by the first device alone in a search over
# several devices; "mirror": copied from device 0 to the others after every
# prep and setup, so kept in one block there.
FLAGS = ("float", "device 0", "mirror")
# Element types of the buffers (what a field's pointer points to).
_POINTEE = {"float": np.float32, "double": np.float64, "int": np.int32,
            "unsigned int": np.uint32, "signed char": np.int8, "long long": np.int64,
            "PlControl": None, "PlStatus": None}
# Scalar fields: their struct format (every field takes 8 bytes, as the header says).
_SCALAR = {"long long": "q", "double": "d"}

# Bytes of the control block (one PlControl, with room to spare) and int32
# words of the mapped status (one PlStatus); tests/test_cuda_state.py checks
# both against the structs' sizes.
CONTROL_BYTES = 256
STATUS_WORDS = 16
# Each mirror buffer starts at a multiple of this many bytes of its block.
MIRROR_ALIGN = 256
# Room for the uploaded states: a search uses the first; a replica of a search
# over several devices has three views (its own, the workers', the setup's).
STATES = 2
REPLICA_STATES = 3
# Bytes of the memory formula besides the rows, pairs and per-variable
# entries: the control block and the states, each per-variable buffer's
# entry p + 1, stat_err's placeholder and the mirror block's alignment
# (tests/test_cuda_state.py checks that it covers them).
FIXED_BYTES = 4096
# The formula's bytes per variable: the per-variable buffers' bytes per entry
# (205 with 35 buffers) rounded up to a multiple of this.
PER_VARIABLE_ROUNDING = 8


class Field(NamedTuple):
    """One field of ``PlSearch``, in the struct's order."""

    name: str
    ctype: str                 # C type, e.g. ``"double *"`` or ``"long long"``
    extent: str | None         # buffers: one of EXTENTS; scalars: None
    flags: frozenset           # buffers: a subset of FLAGS
    dtype: np.dtype | None     # buffers of numbers: the element type

    @property
    def pointer(self):
        return self.ctype.endswith("*")


class Allocation(NamedTuple):
    """One device allocation of a search's workspace."""

    name: str
    nbytes: int
    parts: tuple = ()          # (name, byte offset) of the buffers inside (the mirror block)


# Buffers of a workspace outside the struct (the kernels do not see them).
# corr0: the first correlation matrix, copied from cov before the search
# changes it, read back for the least-squares step.
OUTSIDE = (Field("corr0", "double *", "p x p", frozenset({"device 0"}), np.dtype(np.float64)),)

_FIELD = re.compile(r"^(?P<type>[A-Za-z_][\w ]*?)\s*(?P<ptr>\*)?\s*(?P<names>\w+(?:\s*,\s*\w+)*)"
                    r"\s*;\s*(?:/\*(?P<comment>.*?)\*/)?$")
_TAG = re.compile(r"^\s*\[([^\]]*)\]")
_MAGIC = re.compile(r"^#define\s+PL_MAGIC\s+(0x[0-9a-fA-F]+|\d+)(?:LL|ll)?\s*$", re.M)


def parse(text):
    """The fields of ``PlSearch`` in ``text`` (a header in ``search_state.h``'s form).

    Returns
    -------
    tuple of Field
        In the struct's order.

    Raises
    ------
    ValueError
        Naming the line, for a line that is not a field declaration or a
        comment, a type outside ``_POINTEE`` / ``_SCALAR``, a buffer without
        a valid ``[extent, flags]`` tag, a scalar with one, or a name
        declared twice.
    """
    end = text.find("} PlSearch;")
    start = text.rfind("typedef struct {", 0, end)
    if end < 0 or start < 0:
        raise ValueError(f"{HEADER}: no 'typedef struct {{ ... }} PlSearch;'")
    first_line = text.count("\n", 0, start) + 2
    fields = []
    for number, raw in enumerate(text[start:end].splitlines()[1:], first_line):
        line = raw.strip()
        if not line or re.fullmatch(r"/\*.*\*/", line):
            continue
        where = f"{HEADER} line {number}"
        m = _FIELD.match(line)
        if not m:
            raise ValueError(f"{where}: cannot read {line!r} as a field of PlSearch")
        ctype = " ".join(m.group("type").split())
        names = [x.strip() for x in m.group("names").split(",")]
        comment = m.group("comment") or ""
        tag = _TAG.match(comment)
        if m.group("ptr"):
            if ctype not in _POINTEE:
                raise ValueError(f"{where}: a pointer to {ctype!r} is not a known buffer type")
            if len(names) != 1:
                raise ValueError(f"{where}: declare one buffer per line")
            if not tag:
                raise ValueError(f"{where}: buffer {names[0]} needs its extent, "
                                 f"/* [{' | '.join(EXTENTS)}] ... */")
            parts = [x.strip() for x in tag.group(1).split(",")]
            if parts[0] not in EXTENTS or not set(parts[1:]) <= set(FLAGS):
                raise ValueError(f"{where}: cannot read the tag [{tag.group(1)}] of {names[0]}; "
                                 f"extents: {', '.join(EXTENTS)}; flags: {', '.join(FLAGS)}")
            dtype = _POINTEE[ctype]
            fields.append(Field(names[0], ctype + " *", parts[0], frozenset(parts[1:]),
                                None if dtype is None else np.dtype(dtype)))
        else:
            if ctype not in _SCALAR:
                raise ValueError(f"{where}: a scalar of type {ctype!r} (8-byte scalars only: "
                                 f"{', '.join(_SCALAR)})")
            if tag:
                raise ValueError(f"{where}: the scalar {', '.join(names)} has an extent")
            fields += [Field(name, ctype, None, frozenset(), None) for name in names]
    seen = set()
    for f in fields:
        if f.name in seen:
            raise ValueError(f"{HEADER}: PlSearch.{f.name} is declared twice")
        seen.add(f.name)
    if not fields:
        raise ValueError(f"{HEADER}: PlSearch has no fields")
    return tuple(fields)


def parse_magic(text):
    """``PL_MAGIC`` of ``text``, the word the kernels check before reading a state."""
    m = _MAGIC.search(text)
    if not m:
        raise ValueError(f"{HEADER}: no '#define PL_MAGIC <integer>'")
    return int(m.group(1), 0)


def state_format(fields):
    """The ``struct`` format of ``fields`` (native alignment, as the C compiler lays them out)."""
    return "@" + "".join("P" if f.pointer else _SCALAR[f.ctype] for f in fields)


_TEXT = _constants.kernel_text(HEADER)
FIELDS = parse(_TEXT)
MAGIC = parse_magic(_TEXT)
_STATE = struct.Struct(state_format(FIELDS))
# sizeof(PlSearch); _scheduler.fill_search checks it against the C compiler's
STATE_BYTES = _STATE.size
BUFFERS = tuple(f for f in FIELDS if f.pointer) + OUTSIDE
DTYPES = {f.name: f.dtype for f in BUFFERS if f.dtype is not None}
MIRROR = tuple(f.name for f in BUFFERS if "mirror" in f.flags)
# Where a field's value comes from when not dev[name] / cfg[name]: the
# status's device address is the mapped host memory's (dev["status_dev"]),
# and two settings have defaults.
_DEV_KEY = {"status": "status_dev"}
_DEFAULTS = {"use_prior": 0, "group_warps": 1}


def row_stride(n):
    """Samples per row of X64 and X32: n rounded up to a multiple of 32."""
    return (n + 31) // 32 * 32


def chunk_parts(ld):
    """Entries per variable of a ``[p x chunks]`` buffer: ``UPDATE_PARTS`` per
    chunk of ``UPDATE_CHUNK`` samples of rows of stride ``ld``, where such
    rows are updated in chunks, else 0. The rule is the launches'
    (``_scheduler.update_chunks``, which imports this module;
    tests/test_backends.py checks that the two agree): rows of n <= ld
    samples have as many chunks, or none (a stride just above the threshold
    may hold an unused buffer)."""
    chunks = -(-ld // _constants.UPDATE_CHUNK)
    if ld < _constants.UPDATE_SPLIT_MIN_N or chunks > _constants.UPDATE_MAX_CHUNKS:
        return 0
    return chunks * _constants.UPDATE_PARTS


def _count(field, p, ld, use_float):
    """Elements of the buffer ``field`` (0: a placeholder)."""
    if "float" in field.flags and not use_float:
        return 0
    return {"p x ld": p * ld, "p x p": p * p, "p + 1": p + 1,
            "p x chunks": p * chunk_parts(ld)}[field.extent]


def _held(field, replica):
    return not (replica and "device 0" in field.flags)


def allocations(p, ld, use_float, multi=False, replica=False):
    """The device allocations of a search's workspace, in the order they are made.

    Parameters
    ----------
    p, ld : int
        Variables and row stride (:func:`row_stride`).
    use_float : bool
        Float comparisons (their error bounds need ``stat_err``).
    multi : bool
        Part of a search over several devices: the ``mirror`` buffers share
        one block (``"mirror"``, whose parts give each buffer's offset).
    replica : bool
        A device other than the first: no ``device 0`` buffers, and room for
        three states.

    Returns
    -------
    list of Allocation
        Every buffer of ``PlSearch`` but the status (mapped host memory), the
        buffers of ``OUTSIDE``, the mirror block and ``"search"`` (the
        uploaded states). A buffer has at least 8 bytes.
    """
    out, mirror = [], []
    for f in BUFFERS:
        if f.extent == "host" or not _held(f, replica):
            continue
        if f.extent == "control":
            out.append(Allocation(f.name, CONTROL_BYTES))
        elif (multi or replica) and "mirror" in f.flags:
            mirror.append(f)
        else:
            out.append(Allocation(f.name, max(_count(f, p, ld, use_float) * f.dtype.itemsize, 8)))
    if mirror:
        parts, at = [], 0
        for f in mirror:
            parts.append((f.name, at))
            at += -(-_count(f, p, ld, use_float) * f.dtype.itemsize // MIRROR_ALIGN) * MIRROR_ALIGN
        out.append(Allocation("mirror", at, tuple(parts)))
    out.append(Allocation("search", (REPLICA_STATES if replica else STATES) * STATE_BYTES))
    return out


def _formula(n, p, use_float, replica):
    ld = row_stride(n)
    rows = pairs = per_variable = chunks = 0
    for f in BUFFERS:
        if not _held(f, replica) or f.dtype is None:
            continue
        if f.extent == "p x ld":
            rows += f.dtype.itemsize
        elif f.extent == "p x chunks":
            chunks += f.dtype.itemsize
        elif f.extent == "p x p" and (use_float or "float" not in f.flags):
            pairs += f.dtype.itemsize
        elif f.extent == "p + 1":
            per_variable += f.dtype.itemsize
    per_variable = -(-per_variable // PER_VARIABLE_ROUNDING) * PER_VARIABLE_ROUNDING
    return p * ld * rows + p * p * pairs + p * (per_variable + chunk_parts(ld) * chunks) + FIXED_BYTES


def device_bytes(n, p, use_float=True):
    """Device memory of a CUDA search of p variables and n samples (on one GPU or the first).

    The rows' and pairs' buffers exactly, the per-variable buffers and the
    fixed blocks within an allowance (``PER_VARIABLE_ROUNDING``,
    ``FIXED_BYTES``).
    """
    return _formula(n, p, use_float, replica=False)


def replica_bytes(n, p):
    """Device memory of each further GPU of a search over several GPUs
    (``fit(devices=...)``): a replica of the data, the correlations, the
    partner orders and the per-variable buffers; the ``device 0`` buffers
    stay on the first GPU, which needs :func:`device_bytes`."""
    return _formula(n, p, True, replica=True)


def pack(dev, cfg):
    """The bytes of a ``PlSearch``: buffers from ``dev``, scalars from ``cfg``.

    Parameters
    ----------
    dev : dict
        Device address of every buffer of the struct (``"status_dev"``: the
        status's, in mapped host memory).
    cfg : dict
        The search's settings, one per scalar field (``use_prior`` and
        ``group_warps`` default to 0 and 1).

    Returns
    -------
    bytes
        ``STATE_BYTES`` of them; ``magic`` is ``PL_MAGIC``.
    """
    values = []
    for f in FIELDS:
        if f.pointer:
            values.append(dev[_DEV_KEY.get(f.name, f.name)])
        elif f.name == "magic":
            values.append(MAGIC)
        elif f.name in _DEFAULTS:
            values.append(cfg.get(f.name, _DEFAULTS[f.name]))
        else:
            values.append(cfg[f.name])
    return _STATE.pack(*values)
