"""scipy's LAPACK routines without the import of ``scipy.linalg``.

Importing ``scipy.linalg`` costs most of a first small fit (scipy's
array-API layer imports most of numpy's submodules, ``numpy.f2py`` and
``numpy.testing`` included; docs/design/pipeline.rst, "The first fit without
scipy.linalg"), whose least squares need two LAPACK routines only. Those routines live in the compiled module ``scipy.linalg._flapack``;
loading that file alone gives the very objects that
``scipy.linalg.lapack.dpotrf`` etc. are: Python keeps one copy of such a
module per process, and ``scipy.linalg``, when imported later, finds it
registered under its name and uses it. Results therefore cannot differ.
Where the file cannot be found or loaded alone, the package is imported.
"""

import importlib.machinery
import importlib.util
import os
import sys

MODULE = "scipy.linalg._flapack"


def flapack():
    """The module ``scipy.linalg._flapack`` (scipy's double-precision LAPACK wrappers)."""
    mod = sys.modules.get(MODULE)
    if mod is not None:
        return mod
    try:
        mod = _load_alone()
    except Exception:  # e.g. a scipy whose layout differs: the package below
        mod = None
    if mod is None:
        from scipy.linalg import _flapack as mod
    return mod


def lapack(*names):
    """scipy's LAPACK routines ``names`` (``scipy.linalg.lapack.<name>``)."""
    mod = flapack()
    return tuple(getattr(mod, name) for name in names)


def _load_alone():
    """``scipy.linalg._flapack`` loaded from its file, without ``scipy`` or ``scipy.linalg``."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(base, "linalg", "_flapack" + suffix)
            if os.path.isfile(path):
                loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
                mod_spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
                mod = importlib.util.module_from_spec(mod_spec)
                loader.exec_module(mod)
                sys.modules[MODULE] = mod  # the module scipy.linalg will use
                return mod
    return None
