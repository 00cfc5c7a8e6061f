"""Messages for people, logs for logs (issue 19 item 7).

``Solution.message`` is one or two sentences: what was proven and why the search stopped. The trail of a
search (each bound, core, enumeration and sub-solve) goes to the ``dpopt`` logger (:data:`logger`) and to
``details["steps"]``; nothing reaches the console unless asked: ``verbose=True`` (any backend call through
the registry) or ``dpopt ... --verbose`` shows the log on stderr (:func:`to_stderr`). stdout is never used.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager

logger = logging.getLogger("dpopt")
logger.addHandler(logging.NullHandler())     # a library: silent unless the application configures logging


def steps(trail, where: str = "") -> list[str]:
    """Log each step of ``trail`` at INFO (prefixed with ``where``) and return them as a list of strings."""
    out = [str(s) for s in trail]
    for s in out:
        logger.info("%s%s", f"{where}: " if where else "", s)
    return out


@contextmanager
def to_stderr(enabled: bool = True, level: int = logging.INFO):
    """While the block runs, show the ``dpopt`` log on stderr (no effect when not ``enabled``, or when a
    stderr handler is already attached)."""
    if not enabled or any(getattr(h, "_dpopt_console", False) for h in logger.handlers):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler._dpopt_console = True
    handler.setFormatter(logging.Formatter("dpopt: %(message)s"))
    old = logger.level
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
