"""Run a call in a forked child process with a time bound, so a regression to a hang fails the test
instead of stalling the whole run (the bound is generous: a hang, not speed, is what is tested)."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import traceback

import pytest


def _child(conn, fn, args, kwargs):
    try:
        out = ("ok", fn(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - sent back to the parent
        out = ("raised", exc, traceback.format_exc())
    try:
        conn.send(out)
    except (pickle.PicklingError, TypeError, AttributeError):
        conn.send(("raised", RuntimeError(f"unpicklable result: {out[1]!r}"), ""))
    conn.close()


def run_bounded(fn, *args, timeout: float = 60.0, **kwargs):
    """``fn(*args, **kwargs)`` in a child process; its return value (picklable), or its exception re-raised.

    Fails the test when the call has not finished after ``timeout`` seconds (the child is killed)."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=True)
    proc.start()
    send.close()
    ready = recv.poll(timeout)
    if not ready:
        proc.kill()
        proc.join()
        pytest.fail(f"{getattr(fn, '__name__', fn)}{args} did not finish within {timeout:g} s (a hang)")
    try:
        out = recv.recv()
    except EOFError:
        proc.join()
        pytest.fail(f"{getattr(fn, '__name__', fn)}{args}: the child died (exit code {proc.exitcode})")
    proc.join()
    if out[0] == "raised":
        raise out[1]
    return out[1]
