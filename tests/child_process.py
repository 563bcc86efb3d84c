"""The environment of a test's Python child process."""

import os
from pathlib import Path

import paralingam


def child_env(**overrides):
    """``os.environ`` with ``overrides``, and the folder of the paralingam this
    process imported first on ``PYTHONPATH``.

    A child started in a source checkout would otherwise import that tree,
    which has no compiled extensions where the package is installed (CI).
    """
    env = {**os.environ, **overrides}
    here = str(Path(paralingam.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return env
