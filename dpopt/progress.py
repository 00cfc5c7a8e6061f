"""Progress bars for long runs, one home for every bar in dpopt: tqdm on stderr (never stdout, so piped
output and ``--json`` stay clean), drawn only when asked (``progress=True``; the CLI asks when stderr is a
terminal). A bar is a context manager, so an interrupt (Ctrl-C) closes it cleanly before the
KeyboardInterrupt reaches the caller."""

from __future__ import annotations

import sys


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
