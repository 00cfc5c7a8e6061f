"""Progress for long runs, one home for every bar and progress line in dpopt. Bars: tqdm on stderr (never stdout, so piped
output and ``--json`` stay clean), drawn only when asked (``progress=True``; the CLI asks when stderr is a
terminal). A bar is a context manager, so an interrupt (Ctrl-C) closes it cleanly before the
KeyboardInterrupt reaches the caller. Lines: :class:`BoundProgress` reports a search's incumbent and bound
as it goes (the ``dpopt.progress`` logger), :func:`lines_to_stderr` shows them."""

from __future__ import annotations

import logging
import math
import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar


def _bar(label: str, enabled: bool, **kw):
    from tqdm import tqdm

    return tqdm(desc=label, disable=not enabled, file=sys.stderr, leave=False, dynamic_ncols=True,
                mininterval=0.2, **kw)


def progress_bar(total: int, label: str, enabled: bool):
    """A tqdm bar of ``total`` steps labelled ``label`` (disabled: a no-op with the same methods)."""
    return _bar(label, enabled, total=max(int(total), 1))


def progress_iter(items, label: str, enabled: bool):
    """``items`` with a tqdm bar over them (labelled ``label``) when ``enabled``."""
    return _bar(label, enabled, iterable=items)


# ---------------------------------------------------------------------------------- bound and incumbent lines
#: the logger of progress lines (a child of the ``dpopt`` logger: ``verbose=True`` shows them with the log)
progress_logger = logging.getLogger("dpopt.progress")
#: seconds a solve runs before its first progress line, and between two lines
PROGRESS_AFTER = 2.0
PROGRESS_EVERY = 2.0


_STAGE: ContextVar[str] = ContextVar("dpopt_progress_stage", default="")


@contextmanager
def stage(text: str):
    """Lines of the searches run inside the block name ``text`` after their label (e.g. a search on a smaller
    model, whose incumbent and bound are not the model's own)."""
    token = _STAGE.set(text)
    try:
        yield
    finally:
        _STAGE.reset(token)


class BoundProgress:
    """Progress of a search that has an incumbent (best design's objective) and a proven lower bound: once the
    search has run :data:`PROGRESS_AFTER` seconds, a line "label: incumbent …, bound …, gap …" every
    :data:`PROGRESS_EVERY` seconds to the ``dpopt.progress`` logger (shown on stderr with ``verbose=True``,
    and by the CLI on a terminal). Costs one clock read per update when nothing is shown."""

    def __init__(self, label: str):
        st = _STAGE.get()
        self.label = f"{label} ({st})" if st else label
        self.t0 = time.monotonic()
        self.last = -math.inf
        self.lines = 0

    def update(self, incumbent: float, bound: float) -> None:
        now = time.monotonic()
        if now - self.t0 < PROGRESS_AFTER or now - self.last < PROGRESS_EVERY:
            return
        if not progress_logger.isEnabledFor(logging.INFO):
            return
        self.last = now
        self.lines += 1
        inc = f"{incumbent:.10g}" if math.isfinite(incumbent) else "none yet"
        bnd = f"{bound:.10g}" if math.isfinite(bound) else "none yet"
        gap = (f"{max(incumbent - bound, 0.0) / abs(incumbent):.2e}"
               if math.isfinite(incumbent) and math.isfinite(bound) and incumbent else "-")
        progress_logger.info("%s: incumbent %s, bound %s, gap %s (%.1f s)", self.label, inc, bnd, gap,
                             now - self.t0)


@contextmanager
def lines_to_stderr(enabled: bool):
    """While the block runs, show the progress lines (only them) on stderr: the CLI's default on a terminal
    (``--verbose`` shows them with the whole log instead). No effect when not ``enabled``."""
    if not enabled:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dpopt: %(message)s"))
    old = progress_logger.level
    progress_logger.addHandler(handler)
    progress_logger.propagate = False          # not twice when the dpopt log is shown too
    progress_logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        progress_logger.removeHandler(handler)
        progress_logger.propagate = True
        progress_logger.setLevel(old)
