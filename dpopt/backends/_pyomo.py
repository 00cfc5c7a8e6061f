"""What the Pyomo backends share (not a backend: modules starting with ``_`` are not registered)."""

from __future__ import annotations

import logging
from contextlib import contextmanager


@contextmanager
def quiet_pyomo_log():
    """Silence Pyomo's "Loading a SolverResults object with an 'aborted' status" warning during a solve:
    a time-limited solve is reported through ``Solution.status``, so the log line is noise."""
    log = logging.getLogger("pyomo.core")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
