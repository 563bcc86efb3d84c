"""Progress bars on standard error, shared by every long step of paralingam.

One helper for the bootstraps, the HSIC p-values and any other loop that
counts units of work (resamples, tiles, search iterations)::

    from ._progress import Progress

    with Progress(n_sampling, progress, desc="bootstrap", unit="resample") as bar:
        for k in range(n_sampling):
            ...
            bar.update(1)

``progress`` is the user's option:

* ``"auto"`` (default): a bar only when standard error is a terminal
  (``sys.stderr.isatty()``), so pipelines, log files, notebooks and tests
  stay silent; it is drawn once the work has taken ``AUTO_DELAY_S`` seconds,
  so that quick work on a terminal leaves no bar behind;
* ``True``: always, from the first update, whatever standard error is;
* ``False``: never.

The bar is tqdm's when tqdm is installed (imported lazily, when a bar is
drawn); without it, one line rewritten in place with carriage returns.
A disabled bar costs one attribute test per update.
"""

import sys
import threading
import time

__all__ = ["Progress", "check_progress", "progress_enabled"]

MODES = (True, False, "auto")
# "auto" draws nothing before this many seconds: quick work on a terminal
# leaves no bar in the output.
AUTO_DELAY_S = 1.0
# The plain line is rewritten at most this often (and at the end).
PLAIN_INTERVAL_S = 0.2


def check_progress(progress):
    """``progress`` if it is True, False or ``"auto"``; ValueError naming it otherwise.

    Other truthy values (``1``, ``"yes"``) are refused rather than guessed.
    """
    if isinstance(progress, bool) or (isinstance(progress, str) and progress == "auto"):
        return progress
    try:  # numpy's bool_
        import numpy as np

        if isinstance(progress, np.bool_):
            return bool(progress)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    raise ValueError(f"progress must be True, False or 'auto'; got {progress!r}")


def stderr_is_terminal():
    """Whether ``sys.stderr`` is a terminal (False when it is missing or closed)."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def progress_enabled(progress):
    """Whether a bar with option ``progress`` is shown (see the module docstring)."""
    progress = check_progress(progress)
    if progress == "auto":
        return stderr_is_terminal()
    return progress


def _plural(unit):
    if not unit:
        return ""
    return unit + ("es" if unit.endswith(("s", "sh", "ch", "x")) else "s")


class Progress:
    """A progress bar on standard error, or nothing (see the module docstring).

    Parameters
    ----------
    total : int
        Units of work in all.
    progress : bool or {"auto"}, default "auto"
        ``True`` always, ``"auto"`` when standard error is a terminal,
        ``False`` never. Anything else raises ValueError.
    desc : str
        What is counted, the bar's prefix (``"bootstrap"``, ``"p-values"``).
    unit : str
        One unit of work, singular (``"resample"``, ``"tile"``).
    delay : float, optional
        Seconds before anything is drawn; default ``AUTO_DELAY_S`` for
        ``"auto"`` and 0 for ``True``.

    Notes
    -----
    Use it as a context manager, or call :meth:`close` at the end (also on
    errors and Ctrl-C, so that the terminal's line is ended). :meth:`update`
    may be called from several threads.
    """

    def __init__(self, total, progress="auto", *, desc="", unit="it", delay=None):
        mode = check_progress(progress)
        self.total = int(total)
        self.desc, self.unit = desc, unit
        self.n = 0
        self.enabled = progress_enabled(mode) and self.total > 0
        self.delay = float(delay) if delay is not None else \
            (AUTO_DELAY_S if mode == "auto" else 0.0)
        self._start = time.perf_counter()
        self._bar = None       # tqdm's bar, False for the plain line, None before the first draw
        self._written = False  # the plain line has been drawn
        self._last = -float("inf")
        self._closed = False
        self._lock = threading.Lock()

    # -- counting ------------------------------------------------------

    def update(self, k=1):
        """``k`` more units done."""
        if not self.enabled:
            self.n += k
            return
        with self._lock:
            self.n += k
            self._draw(k)

    def update_to(self, done):
        """``done`` units done in all (for callers that count themselves)."""
        self.update(done - self.n)

    def _draw(self, k):
        if self._closed:
            return
        if self._bar is None:
            self._bar = self._make_bar()
        if self._bar:
            try:
                self._bar.update(k)
            except (OSError, ValueError, AttributeError):  # stderr closed: progress is optional
                self.enabled, self._bar = False, False
            return
        elapsed = time.perf_counter() - self._start
        if elapsed < self.delay:  # work done before the delay leaves no line (as tqdm's)
            return
        if self.n >= self.total or elapsed - self._last >= PLAIN_INTERVAL_S:
            self._last = elapsed
            self._write_line(elapsed)

    def _make_bar(self):
        stream = sys.stderr
        if stream is None or getattr(stream, "closed", False):
            return False  # (pythonw, "2>&-": the plain line finds it unwritable and stops)
        try:
            from tqdm import tqdm
        except ImportError:
            return False
        kwargs = dict(total=self.total, desc=self.desc or None, unit=self.unit or "it",
                      initial=0, file=sys.stderr)
        try:
            try:
                return tqdm(delay=self.delay, **kwargs)
            except TypeError:  # tqdm < 4.60 has no delay
                return tqdm(**kwargs)
        except (OSError, ValueError, AttributeError):  # stderr unwritable: no bar
            return False

    def _write_line(self, elapsed):
        done = min(self.n, self.total)
        line = f"{self.desc}: " if self.desc else ""
        line += f"{done}/{self.total} {_plural(self.unit)} ({100 * done / self.total:.0f}%), " \
                f"{elapsed:.1f} s"
        if 0 < done < self.total:
            line += f", ~{elapsed / done * (self.total - done):.1f} s left"
        try:
            sys.stderr.write("\r" + line + "\x1b[K" * stderr_is_terminal())
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):  # stderr closed: progress is optional
            self.enabled = False
            return
        self._written = True

    # -- ending --------------------------------------------------------

    def close(self):
        """End the bar (the terminal's line); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._bar:
                try:
                    self._bar.close()
                except (OSError, ValueError, AttributeError):
                    pass
            elif self._written:
                try:
                    sys.stderr.write("\n")
                    sys.stderr.flush()
                except (OSError, ValueError, AttributeError):
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
