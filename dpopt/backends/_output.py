"""Where a compiled solver's own printing goes, for every backend (not a backend: ``_`` modules are not
registered).

Solvers written in C/C++ (SCIP, HiGHS) print straight to file descriptors 1 and 2, past Python's
``sys.stdout``. dpopt prints nothing a solver says unless asked: :func:`descriptor_output` points both
descriptors at stderr (``verbose``) or at the null device for the duration of a call. (HiGHS's banner on
its first use in a process is kept off stdout by :mod:`dpopt.backends._highs`.)
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from contextlib import contextmanager

_OUTPUT_LOCK = threading.Lock()


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):   # pragma: no cover - no C library handle on this platform
        pass


@contextmanager
def descriptor_output(verbose: bool):
    """Route what is written to file descriptors 1 and 2 during the block: to stderr when ``verbose``, else
    to the null device. The solver writes straight to the descriptor (no pipe, no reader thread)."""
    with _OUTPUT_LOCK:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        _flush_c_stdio()
        try:
            saved = (os.dup(1), os.dup(2))
        except OSError:     # no descriptors to redirect (embedded interpreter): leave output alone
            yield
            return
        target = os.dup(2) if verbose else os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(target, 1)
            os.dup2(target, 2)
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, target):
                os.close(fd)
