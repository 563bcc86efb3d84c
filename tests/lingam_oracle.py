"""lingam 1.13's results for the comparison tests: live where lingam 1.13 is
installed, else replayed from the fixtures recorded in ``tests/fixtures/lingam/``.

lingam 1.13 pins ``scipy<=1.13.1`` (and so ``numpy<2.3``), so it cannot be
installed beside newer numpy or scipy. The comparison tests therefore use
``lingam = lingam_module("lingam", __name__)`` instead of ``import lingam``:
a stand-in that records every call made on it, keyed by the chain of calls
and a hash of their arguments (arrays hashed as float32, so that the last
bits of data made with another numpy's BLAS give the same key):

* **live** (lingam 1.13.0 importable; the CI run): every call goes to lingam,
  and each result that a fixture holds is checked against it, so a fixture
  that no longer equals lingam's live result fails the test that uses it;
* **replay** (lingam missing, or another version): results come from the
  fixture; a call with no recorded result fails, naming the recorder;
* **record** (``PARALINGAM_LINGAM_FIXTURES=record``, set by
  ``tools/record_lingam_fixtures.py``): live, and the results are written to
  the fixtures at the end of the session.

``PARALINGAM_LINGAM_FIXTURES=live`` (CI) makes a missing lingam 1.13 an
error instead of a replay; ``=replay`` hides an installed lingam
(``tests/conftest.py``), to run the suite as where lingam is missing.

Results that are lingam objects (models, bootstrap results) are stand-ins
again; data (arrays, numbers, strings, lists, dicts, tuples, sets, and
graphviz graphs as their DOT text, replayed as an object with ``source``) are stored in
one gzip'd JSON file per test module (no pickle). Other results are not
recorded: the test is skipped when replaying, with the reason.
Tests that need lingam itself (signatures, identity of objects) use
:func:`live_lingam`, which skips them, naming why, when lingam 1.13 is missing.
"""

import base64
import builtins
import contextlib
import gzip
import hashlib
import io
import json
import os
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "lingam"
LINGAM_VERSION = "1.13.0"
ENV = "PARALINGAM_LINGAM_FIXTURES"
# live results against the fixture: lingam's arithmetic on another BLAS or
# numpy may differ in the last bits
RTOL, ATOL = 1e-7, 1e-10


def _lingam_version():
    try:
        import lingam
    except ImportError:
        return None
    return getattr(lingam, "__version__", "unknown")


def mode():
    """``"record"``, ``"live"`` or ``"replay"`` (see the module docstring)."""
    live = _lingam_version() == LINGAM_VERSION
    wanted = os.environ.get(ENV, "")
    if wanted in ("record", "live") and not live:
        # CI sets "live": a run that silently fell back to the fixtures would
        # not compare with lingam at all
        raise RuntimeError(f"{ENV}={wanted} needs lingam {LINGAM_VERSION}; found "
                           f"{_lingam_version() or 'none'} (pip install '.[lingam]')")
    if wanted == "record":
        return "record"
    return "live" if live else "replay"


def live_lingam(name="lingam"):
    """lingam's module ``name`` itself; skip the test when lingam 1.13 is missing."""
    version = _lingam_version()
    mode()  # PARALINGAM_LINGAM_FIXTURES=live: lingam must be there
    if version != LINGAM_VERSION:
        pytest.skip(f"needs lingam {LINGAM_VERSION} itself (found: {version or 'none'}), "
                    "not its recorded results", allow_module_level=True)
    import importlib

    return importlib.import_module(name)


# ----------------------------------------------------------------------
# keys: a canonical text of the arguments
# ----------------------------------------------------------------------

def _digest(data):
    return hashlib.sha1(data).hexdigest()[:16]


def canonical(x, depth=0):
    """A text that identifies ``x`` across numpy versions and machines."""
    if isinstance(x, _Stand):
        return "P:" + object.__getattribute__(x, "_state")
    if x is None or isinstance(x, (bool, str, int)):
        return repr(x)
    if isinstance(x, float):
        return "f:" + repr(np.float32(x).item())
    if isinstance(x, np.generic):
        return canonical(np.asarray(x), depth)
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f":
            raw = np.ascontiguousarray(x, dtype=np.float32)
        elif x.dtype.kind in "iub":
            raw = np.ascontiguousarray(x, dtype=np.int64)
        else:
            return f"a{x.shape}:" + canonical(x.tolist(), depth + 1)
        return f"nd{x.dtype.kind}{x.shape}:{_digest(raw.tobytes())}"
    if hasattr(x, "to_numpy") and hasattr(x, "columns"):  # a DataFrame
        return ("df:" + canonical(list(map(str, x.columns)), depth + 1)
                + canonical(x.to_numpy(), depth + 1))
    if isinstance(x, (list, tuple)):
        return "[" + ",".join(canonical(v, depth + 1) for v in x) + "]"
    if isinstance(x, dict):
        return "{" + ",".join(f"{canonical(k)}={canonical(v, depth + 1)}"
                              for k, v in sorted(x.items(), key=lambda kv: repr(kv[0]))) + "}"
    if isinstance(x, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"fn:{x.__module__}.{x.__qualname__}"
    if hasattr(x, "__dict__") and depth < 4:
        return f"{type(x).__qualname__}:" + canonical(dict(vars(x)), depth + 1)
    return f"{type(x).__qualname__}:{x!r}"


def _call_key(state, args, kwargs):
    text = canonical(list(args)) + canonical(kwargs)
    return f"{state}({_digest(text.encode())})"


# ----------------------------------------------------------------------
# values: a JSON spec plus arrays
# ----------------------------------------------------------------------

class _Unsupported(Exception):
    pass


# the package whose objects are stand-ins (a test of this module uses another)
PACKAGE = "lingam"


def _in_package(module):
    module = module or ""
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def _is_lingam_object(x):
    """A module, class, function, model or result of lingam (not plain data)."""
    if isinstance(x, types.MethodType):
        return _is_lingam_object(x.__self__)
    return (isinstance(x, types.ModuleType) or _in_package(getattr(type(x), "__module__", ""))
            or (callable(x) and _in_package(getattr(x, "__module__", ""))))


def _encode(x, arrays):
    """The JSON spec of ``x``; its arrays are appended to ``arrays``."""
    if _is_lingam_object(x):
        return {"t": "obj", "module": isinstance(x, types.ModuleType)}
    if x is None or isinstance(x, (bool, str, int, float)):
        return {"t": "py", "v": x}
    if isinstance(x, (np.ndarray, np.generic)) and np.asarray(x).dtype.kind in "biuf":
        arrays.append(np.asarray(x))
        return {"t": "nd", "i": len(arrays) - 1, "scalar": isinstance(x, np.generic)}
    if isinstance(x, (list, tuple)):
        return {"t": type(x).__name__, "v": [_encode(v, arrays) for v in x]}
    if isinstance(x, dict):
        items = list(x.items())
        return {"t": "dict", "k": [_encode(k, arrays) for k, _ in items],
                "v": [_encode(v, arrays) for _, v in items]}
    if isinstance(x, (set, frozenset)):
        return {"t": "set", "v": [_encode(v, arrays) for v in sorted(x, key=repr)]}
    if type(x).__module__.startswith("graphviz.") and isinstance(getattr(x, "source", None), str):
        # a graph: its DOT text (what the tests compare)
        return {"t": "dot", "v": x.source}
    raise _Unsupported(f"{type(x).__module__}.{type(x).__qualname__}")


def _hashable(x):
    return tuple(map(_hashable, x)) if isinstance(x, list) else x


def _decode(spec, arrays, key, store, live=None):
    """The value of ``spec``: lingam objects become stand-ins (around ``live``)."""
    t = spec["t"]
    if t == "obj":
        return _Stand(store, key, live, module=spec["module"])
    if t == "py":
        return spec["v"]
    if t == "nd":
        a = arrays[spec["i"]]
        return a.reshape(-1)[0] if spec["scalar"] else a.copy()
    if t == "set":
        return {_hashable(_decode(s, arrays, key, store)) for s in spec["v"]}
    if t == "dot":
        return live if live is not None else types.SimpleNamespace(source=spec["v"])
    if t in ("list", "tuple"):
        vals = [_decode(s, arrays, f"{key}[{i}]", store, None if live is None else live[i])
                for i, s in enumerate(spec["v"])]
        return vals if t == "list" else tuple(vals)
    if t == "dict":
        keys = [_hashable(_decode(s, arrays, key, store)) for s in spec["k"]]
        live_vals = list(live.values()) if live is not None else [None] * len(keys)
        return {k: _decode(s, arrays, f"{key}[{i}]", store, lv)
                for i, (k, s, lv) in enumerate(zip(keys, spec["v"], live_vals))}
    if t == "raise":
        kind = getattr(builtins, spec["type"], None)
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            kind = RuntimeError
        raise kind(spec["msg"])
    if t == "unsupported":
        pytest.skip(f"lingam's result {key} is a {spec['type']}, which is not recorded: "
                    f"this comparison needs lingam {LINGAM_VERSION} itself")
    raise ValueError(f"unknown fixture entry {spec!r}")


def _warned(caught):
    """``[category name, message]`` of each warning lingam emitted."""
    return [[w.category.__name__, str(w.message)] for w in caught]


def _warn_again(recorded):
    for name, message in recorded:
        category = getattr(builtins, name, None)
        if not (isinstance(category, type) and issubclass(category, Warning)):
            category = UserWarning
        warnings.warn(message, category, stacklevel=4)


def _has_object(spec):
    if spec["t"] == "obj":
        return True
    return any(_has_object(s) for s in spec.get("v", []) if isinstance(s, dict) and "t" in s) \
        if spec["t"] in ("list", "tuple", "dict") else False


def _same(recorded, live, key):
    """Assert that a fixture's value equals lingam's live value."""
    if isinstance(live, _Stand):
        return
    if isinstance(live, (list, tuple)) and isinstance(recorded, (list, tuple)):
        assert len(live) == len(recorded), key
        for i, (r, v) in enumerate(zip(recorded, live)):
            _same(r, v, f"{key}[{i}]")
        return
    if isinstance(live, dict) and isinstance(recorded, dict):
        assert list(map(_hashable, live)) == list(recorded), key
        for (_, v), r in zip(live.items(), recorded.values()):
            _same(r, v, key)
        return
    if isinstance(live, (set, frozenset)):
        assert live == recorded, key
        return
    if hasattr(live, "source") and hasattr(recorded, "source"):
        assert live.source == recorded.source, key
        return
    if isinstance(live, str) or live is None:
        assert live == recorded, key
        return
    np.testing.assert_allclose(np.asarray(live, dtype=float), np.asarray(recorded, dtype=float),
                               rtol=RTOL, atol=ATOL, err_msg=(
                                   f"lingam's live result {key} differs from its fixture: "
                                   "run tools/record_lingam_fixtures.py"))


# ----------------------------------------------------------------------
# the fixtures of one test module
# ----------------------------------------------------------------------

class Store:
    """The recorded results of one owner (a test module): ``key -> (spec, arrays)``."""

    all = {}

    def __init__(self, owner):
        self.owner = owner
        self.path = FIXTURES / f"{owner}.json.gz"
        self.mode = mode()
        self.entries = {}
        self.recorded = {}
        if self.path.exists() and self.mode != "record":
            self.entries = read(self.path)["entries"]

    @classmethod
    def of(cls, owner):
        if owner not in cls.all:
            cls.all[owner] = cls(owner)
        return cls.all[owner]

    def resolve(self, key, compute):
        """lingam's result for ``key``: ``compute()`` live, else the recorded one."""
        if self.mode == "replay":
            if key not in self.entries:
                pytest.fail(f"no recorded lingam result for {self.owner}: {key} (inputs "
                            "differ from the recording, or the fixtures are out of date: run "
                            "tools/record_lingam_fixtures.py where lingam 1.13 is installed)")
            spec, arrays = self.entries[key]
            _warn_again(spec.get("w", []))
            sys.stdout.write(spec.get("out", ""))
            return _decode(spec, arrays, key, self)
        caught, printed = [], io.StringIO()
        try:
            with warnings.catch_warnings(record=True) as caught, \
                    contextlib.redirect_stdout(printed):
                warnings.simplefilter("always")
                value = compute()
        except Exception as exc:
            if self.mode == "record":
                self.recorded.setdefault(key, ({"t": "raise", "type": type(exc).__name__,
                                                "msg": str(exc), "w": _warned(caught),
                                                "out": printed.getvalue()}, []))
            raise
        finally:
            for w in caught:  # lingam's warnings and printout reach the test as without
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            sys.stdout.write(printed.getvalue())
        arrays = []
        try:
            spec = _encode(value, arrays)
        except _Unsupported as exc:
            spec, arrays = {"t": "unsupported", "type": str(exc)}, []
            if self.mode == "record":
                self.recorded.setdefault(key, (spec, arrays))
            return value
        if caught:
            spec["w"] = _warned(caught)
        if printed.getvalue():
            spec["out"] = printed.getvalue()
        if self.mode == "record":
            self.recorded.setdefault(key, (spec, arrays))
        elif key in self.entries and self.entries[key][0]["t"] not in ("raise", "unsupported"):
            rspec, rarrays = self.entries[key]
            _same(_decode(rspec, rarrays, key, self), _decode(spec, arrays, key, self, value),
                  f"{self.owner}: {key}")
        return _decode(spec, arrays, key, self, value) if _has_object(spec) else value

    def save(self):
        """Write the recorded results (record mode)."""
        if self.recorded:
            write(self.path, self.recorded)


def read(path):
    """A fixture file: ``{"lingam": version, "entries": {key: (spec, arrays)}}``."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    doc["entries"] = {key: (spec, [_array(a) for a in arrays])
                      for key, (spec, arrays) in doc["entries"].items()}
    return doc


def write(path, entries):
    """Write ``entries`` (key -> (spec, arrays)): gzip'd JSON, arrays as base64 bytes.

    One small file per test module: an .npz would spend a zip member (some
    hundred bytes) on each of thousands of tiny arrays.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"lingam": LINGAM_VERSION, "numpy": np.__version__,
           "entries": {key: [spec, [_packed(a) for a in arrays]]
                       for key, (spec, arrays) in sorted(entries.items())}}
    # mtime=0: the same results give the same bytes
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


def _packed(a):
    a = np.asarray(a)  # (ascontiguousarray would make a scalar 1-d)
    dtype = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    return [dtype.str, list(a.shape), base64.b64encode(a.astype(dtype).tobytes()).decode()]


def _array(packed):
    dtype, shape, data = packed
    return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape).copy()


def save_all():
    """Write every owner's recorded results (called at the end of a recording session)."""
    for store in Store.all.values():
        if store.mode == "record":
            store.save()


# ----------------------------------------------------------------------
# the stand-in
# ----------------------------------------------------------------------

DATA_DUNDERS = {"__all__", "__version__", "__name__"}


class _Stand:
    """lingam (a module, class, model or result) seen through the fixtures."""

    def __init__(self, store, state, live=None, module=False, parent=None):
        object.__setattr__(self, "_store", store)
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_live", live)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_parent", parent)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and name not in DATA_DUNDERS:
            raise AttributeError(name)  # protocols (__array__, __len__) are not lingam's
        store, state, live = (object.__getattribute__(self, k) for k in ("_store", "_state", "_live"))
        key = f"{state}.{name}"
        value = store.resolve(key, lambda: getattr(live, name))
        if isinstance(value, _Stand):  # a method's calls change this object
            object.__setattr__(value, "_parent", self)
        return value

    def __setattr__(self, name, value):
        state, live = object.__getattribute__(self, "_state"), object.__getattribute__(self, "_live")
        if live is not None:
            setattr(live, name, _unwrap(value))
        object.__setattr__(self, "_state", f"{state}.{name}={_digest(canonical(value).encode())}")

    def __call__(self, *args, **kwargs):
        store, state, live = (object.__getattribute__(self, k) for k in ("_store", "_state", "_live"))
        key = _call_key(state, args, kwargs)
        value = store.resolve(key, lambda: live(*_unwrap(args), **_unwrap(kwargs)))
        parent = object.__getattribute__(self, "_parent")
        if parent is not None and not object.__getattribute__(parent, "_module"):
            object.__setattr__(parent, "_state", key)  # fit(X) and the like
        return value

    def __iter__(self):
        raise TypeError(f"{object.__getattribute__(self, '_state')} is a lingam object")

    def __repr__(self):
        return f"<lingam stand-in {object.__getattribute__(self, '_state')}>"


def _unwrap(x):
    if isinstance(x, _Stand):
        return object.__getattribute__(x, "_live")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def lingam_module(name="lingam", owner="tests"):
    """lingam's module ``name`` for the tests of ``owner`` (their module's ``__name__``)."""
    store = Store.of(owner.rsplit(".", 1)[-1])
    live = None
    if store.mode != "replay":
        import importlib

        live = importlib.import_module(name)
    return _Stand(store, name, live, module=True)
