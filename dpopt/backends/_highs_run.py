"""HiGHS runs with ``time_limit`` as a hard deadline, for every route that calls HiGHS (not a backend: ``_``
modules are not registered).

HiGHS's own time limit can be overrun, and not only where its interrupt callback could stop it: its MIP
presolve checks neither its clock nor the callback (:func:`dpopt.backends._highs.fit_presolve`), and a
benchmark run found a MIP looping in its node queue (``HighsNodeQueue::link_estim``) for over 40 minutes. No
code in the process can stop that, so HiGHS runs in a worker process that can be killed:

* a worker (:class:`_Worker`, the script :mod:`dpopt.backends._highs_worker`) is started once and kept; each
  run sends it the model's arrays, the options and a start, and it builds and runs HiGHS as this process
  would. It streams back every incumbent HiGHS finds, HiGHS's bound (at most every 50 ms) and, when verbose,
  HiGHS's log;
* a MIP callback in the worker interrupts HiGHS once the limit plus :data:`INTERRUPT_GRACE` has passed (HiGHS
  then returns its point and bound itself); a worker still running at the limit plus
  :data:`HARD_DEADLINE_GRACE` is killed, and the run ends with status ``kTimeLimit``, the last incumbent and
  the last bound received (HiGHS had proven that bound, so it stays one). A worker that dies otherwise (out of
  memory, a crash) ends the run as ``kSolveError`` with its last incumbent; the next run starts a new worker.

The worker is a new interpreter that imports only numpy and highspy (about 0.1 s and 30 MB, once per process
and after each kill), not a fork: a forked worker would hold the pages of its caller's memory at the fork for
as long as it lives, and forking a process for each run cost 12-23 ms (measured on a 6-column MILP in a 0.5 GB
process: the fork, the child's cold HiGHS threads and pages) where sending the arrays costs about a
millisecond. The exact route sends its own arrays (:func:`run_highs`); Pyomo's appsi_highs and cvxpy's HIGHS
drive a HiGHS object of their own, which :func:`guard_highs` and :func:`guarded_highs_objects` make run here.
Where no worker can be started (no POSIX pipes, no Python executable), HiGHS runs in this process with the
callback stop only.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from . import _highs_worker as W
from ._highs import absorb_highs_banner, presolve_fits

#: seconds past ``time_limit`` by which a HiGHS run has returned whatever HiGHS does: then the worker running it
#: is killed
HARD_DEADLINE_GRACE = 0.5

#: seconds past ``time_limit`` after which a MIP callback interrupts HiGHS (which then returns its point and bound
#: itself, before the kill would)
INTERRUPT_GRACE = 0.125

#: seconds a new worker may take in all to start (import numpy and highspy); a run does not wait for it past its
#: own deadline (HiGHS then runs in this process with the time left, and the next run waits again), and a worker
#: not started after this long is given up: HiGHS then runs in this process
WORKER_START_LIMIT = 20.0

#: the worker's script (dpopt's own file; tests put a script that makes HiGHS fail on purpose in its place)
WORKER_SCRIPT = W.__file__


@dataclass
class HighsRun:
    """What one HiGHS run ended with, in HiGHS's own terms (its getters' values, read once): ``status`` a
    ``HighsModelStatus`` (``kTimeLimit`` when dpopt's deadline stopped it, whichever way), ``info`` HiGHS's info
    fields, ``solution`` its point (``col_value``, ``row_value``, ``col_dual``, ``row_dual``, ``value_valid``,
    ``dual_valid``), ``run_time`` seconds. ``killed``: HiGHS did not return by the deadline and its worker was
    killed; the point and bound are then the last ones HiGHS reported (an incumbent it had found, a bound it had
    proven), and the duals and row values are absent. ``text``: HiGHS's words for the status, and why a run
    failed or was killed."""
    status: object
    info: SimpleNamespace
    solution: SimpleNamespace
    run_time: float
    killed: bool = False
    text: str = field(default="")


def _run_of(answer: dict) -> HighsRun:
    import highspy

    return HighsRun(highspy.HighsModelStatus(answer["status"]), SimpleNamespace(**answer["info"]),
                    SimpleNamespace(**answer["solution"]), answer["run_time"], text=answer["text"])


def _last_reported(status, incumbent, bound, run_time, killed, text) -> HighsRun:
    """A run whose worker ended without an answer: its last incumbent and bound, as HiGHS's getters would give
    them (every other info field at HiGHS's default; no duals, no row values)."""
    import highspy

    primal, dual, nodes = bound
    have = incumbent is not None
    value = incumbent[0] if have else math.inf
    gap = (abs(value - dual) / max(abs(value), 1e-300)) if have and math.isfinite(dual) else math.inf
    info = SimpleNamespace(**W.info_dict(highspy.HighsInfo()))
    info.__dict__.update(valid=True, objective_function_value=value, mip_dual_bound=dual, mip_gap=gap,
                         mip_node_count=nodes, primal_solution_status=2 if have else 0, dual_solution_status=0)
    empty = np.zeros(0)
    solution = SimpleNamespace(col_value=incumbent[1] if have else empty, row_value=empty, col_dual=empty,
                               row_dual=empty, value_valid=have, dual_valid=False)
    return HighsRun(status, info, solution, run_time, killed=killed, text=text)


# ---------------------------------------------------------------------------------- the model as arrays
def lp_arrays(h) -> dict:
    """The model loaded in the HiGHS object ``h`` as plain arrays (what the worker rebuilds it from)."""
    model = type(h).getModel(h)
    lp, hess = model.lp_, model.hessian_
    a = lp.a_matrix_
    out = {name: np.asarray(getattr(lp, name), dtype=float) for name in W._LP_ARRAYS}
    out.update(num_col=int(lp.num_col_), num_row=int(lp.num_row_), offset=float(lp.offset_),
               sense=int(lp.sense_), integrality=[int(v) for v in lp.integrality_], a_format=int(a.format_),
               a_start=np.asarray(a.start_, dtype=np.int32), a_index=np.asarray(a.index_, dtype=np.int32),
               a_value=np.asarray(a.value_, dtype=float))
    if hess.dim_ > 0:
        out["hessian"] = dict(dim=int(hess.dim_), format=int(hess.format_),
                              start=np.asarray(hess.start_, dtype=np.int32),
                              index=np.asarray(hess.index_, dtype=np.int32),
                              value=np.asarray(hess.value_, dtype=float))
    return out


lp_of = W.model_of

_DEFAULT_OPTIONS: dict = {}


def changed_options(h) -> dict:
    """The options of ``h`` that differ from a new HiGHS object's (those HiGHS exposes as attributes)."""
    if not _DEFAULT_OPTIONS:
        _DEFAULT_OPTIONS.update(_option_values(_plain_highs_class()().getOptions()))
    now = _option_values(type(h).getOptions(h))
    return {name: value for name, value in now.items() if _DEFAULT_OPTIONS.get(name, object()) != value}


def _option_values(options) -> dict:
    out = {}
    for name in dir(options):
        if name.startswith("_"):
            continue
        value = getattr(options, name)
        if isinstance(value, (bool, int, float, str)):
            out[name] = value
    return out


def _plain_highs_class():
    """``highspy.Highs``, not the class :func:`guarded_highs_objects` puts in its place; every HiGHS object this
    module makes in this process comes from here, after the process's banner is sent nowhere."""
    import highspy

    absorb_highs_banner()
    cls = highspy.Highs
    while getattr(cls, "_dpopt_guarded", False):
        cls = cls.__base__
    return cls


# ---------------------------------------------------------------------------------- the workers
class _Worker:
    """A worker process (:mod:`dpopt.backends._highs_worker` run as a script) and the two pipes to it."""

    def __init__(self):
        import subprocess
        from multiprocessing.connection import Connection

        jobs_in, jobs_out = os.pipe()
        results_in, results_out = os.pipe()
        # the worker's file is loaded by its path, and the current folder ("" at the head of sys.path for -c,
        # absent under PYTHONSAFEPATH) is taken off sys.path, so that no file there stands for numpy or highspy
        code = ("import sys, importlib.util as u; sys.path[:] = [p for p in sys.path if p]; "
                "s = u.spec_from_file_location('dpopt_highs_worker', sys.argv[1]); m = u.module_from_spec(s); "
                "s.loader.exec_module(m); m.main(sys.argv[1:])")
        try:
            argv = [sys.executable, "-c", code, WORKER_SCRIPT, str(jobs_in), str(results_out)]
            self.process = subprocess.Popen(argv, pass_fds=(jobs_in, results_out), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            os.close(jobs_in)
            os.close(results_out)
        self.jobs = Connection(jobs_out, readable=False)
        self.results = Connection(results_in, writable=False)
        self.owner = os.getpid()
        self.ready = self.dead = False
        self.waited = 0.0
        _ALL.append(self)

    def wait_ready(self, limit: float) -> bool:
        """Wait up to ``limit`` seconds for the worker's first message (it has imported HiGHS)."""
        import time

        if not self.ready:
            began = time.monotonic()
            try:
                self.ready = self.results.poll(max(limit, 0.0)) and self.results.recv() == ("ready",)
            except (EOFError, OSError):     # it ended before it was ready
                self.ready, self.dead = False, True
            self.waited += time.monotonic() - began
        return self.ready

    def close(self, kill: bool) -> None:
        """Stop using the worker: kill it (``kill``) or let it end as its job pipe closes; then reap it."""
        if kill:
            self.process.kill()
        for conn in (self.jobs, self.results):
            conn.close()
        if self in _ALL:
            _ALL.remove(self)
        try:
            self.process.wait(timeout=5.0)
        except Exception:  # noqa: BLE001 - a worker that does not end at once is killed
            self.process.kill()
            self.process.wait()


_IDLE: list = []        # workers waiting for a job
_ALL: list = []         # every live worker of this process
_NO_WORKER: list = []   # holds True once a worker could not be started: HiGHS then runs in this process


def _take_worker(wait: float):
    """An idle worker of this process, or a new one, ready within ``wait`` seconds; None when there is none (a
    worker still starting is kept for the next run)."""
    worker = None
    while _IDLE and worker is None:
        worker = _IDLE.pop()
        if worker.owner != os.getpid():
            worker = None
    if worker is None:
        if _NO_WORKER or os.name != "posix" or not sys.executable:
            return None
        try:
            worker = _Worker()
        except OSError:
            _NO_WORKER.append(True)
            return None
    if worker.wait_ready(min(wait, WORKER_START_LIMIT - worker.waited)):
        return worker
    if worker.dead or worker.waited >= WORKER_START_LIMIT or worker.process.poll() is not None:
        worker.close(kill=True)         # it died starting (no highspy for sys.executable?) or never started
        _NO_WORKER.append(True)
    else:
        _IDLE.append(worker)
    return None


def close_workers() -> None:
    """End every idle worker of this process (they end by themselves when the process does; a test that changes
    HiGHS's code in this process calls this so that later runs start workers that see the change)."""
    while _IDLE:
        _IDLE.pop().close(kill=False)


def _forget_after_fork() -> None:
    """In a forked child of this process: the parent's workers are the parent's (the child's copies of their
    pipes are closed, so that a worker still ends when the parent does)."""
    for worker in _ALL:
        for conn in (worker.jobs, worker.results):
            try:
                conn.close()
            except OSError:
                pass
    _IDLE.clear()
    _ALL.clear()


if hasattr(os, "register_at_fork"):
    import atexit

    os.register_at_fork(after_in_child=_forget_after_fork)
    atexit.register(close_workers)


# ---------------------------------------------------------------------------------- the run
def run_highs(arrays: dict, options: dict, time_limit, report=None, columns: int | None = None, start=None,
              verbose: bool = False) -> HighsRun:
    """Run HiGHS on the model ``arrays`` (:func:`lp_arrays`' form) with ``options`` (HiGHS's names), from the
    point ``start`` (``(indices, values)``, optional), with ``time_limit`` (seconds; None: none) as a hard
    deadline: in a worker process (module docstring) that is killed past the limit plus
    :data:`HARD_DEADLINE_GRACE`. ``report(primal, dual)`` (optional) receives HiGHS's incumbent value and bound
    (HiGHS's objective units) as it runs, for progress lines (:class:`dpopt.progress.BoundProgress`).
    ``columns``: only the first ``columns`` values of the point are kept (and sent between the processes), with
    no duals or row values. ``verbose``: HiGHS's log is written to this process's file descriptor 1, where HiGHS
    itself would write it."""
    import time

    import highspy

    called = time.monotonic()
    options = dict(options)
    worker = None if time_limit is None else _take_worker(float(time_limit) + HARD_DEADLINE_GRACE)
    if time_limit is not None:
        time_limit = max(float(time_limit) - (time.monotonic() - called), 1e-3)   # a worker's start counts
        options["time_limit"] = time_limit
        if not presolve_fits(arrays["a_value"].size, time_limit):
            options["presolve"] = "off"
    job = dict(arrays=arrays, options=options, start=start, columns=columns, verbose=bool(verbose),
               interrupt_after=None if time_limit is None else time_limit + INTERRUPT_GRACE)
    if worker is None:
        return _run_of(W.run_job(_plain_highs_class(), **job, report=report))
    begun = time.monotonic()
    kill_at = begun + time_limit + HARD_DEADLINE_GRACE
    incumbent = None                        # (objective, point) last received
    bound = (math.inf, -math.inf, -1)       # (primal, dual, nodes) last received
    answer = failure = None
    died = False
    try:
        try:
            worker.jobs.send(job)
        except OSError:                     # an idle worker that has died since (e.g. the system's OOM killer)
            worker.close(kill=True)
            worker = _take_worker(max(float(time_limit) - (time.monotonic() - called), 0.0) + HARD_DEADLINE_GRACE)
            if worker is None:
                return _run_of(W.run_job(_plain_highs_class(), **job, report=report))
            worker.jobs.send(job)
        while answer is None and failure is None:
            wait = kill_at - time.monotonic()
            if wait <= 0 or not worker.results.poll(wait):
                break
            try:
                message = worker.results.recv()
            except (EOFError, OSError):
                died = True
                break
            kind = message[0]
            if kind == "incumbent":
                incumbent = message[1:]
            elif kind == "bound":
                bound = message[1:]
                if report is not None:
                    report(bound[0], bound[1])
            elif kind == "log":
                os.write(1, message[1].encode(errors="replace"))
            elif kind == "done":
                answer = message[1]
            else:
                failure = message[1]
    except BaseException:
        worker.close(kill=True)
        raise
    spent = time.monotonic() - begun
    if answer is not None or failure is not None:
        _IDLE.append(worker)
        if answer is not None:
            return _run_of(answer)
        return _last_reported(highspy.HighsModelStatus.kSolveError, incumbent, bound, spent, False,
                              f"Solve error: HiGHS failed in its worker: {failure}")
    worker.close(kill=True)
    if died:
        return _last_reported(highspy.HighsModelStatus.kSolveError, incumbent, bound, spent, False,
                              "Solve error: HiGHS's worker process died")
    return _last_reported(highspy.HighsModelStatus.kTimeLimit, incumbent, bound, spent, True,
                          "Time limit reached (HiGHS killed at the deadline)")


# ---------------------------------------------------------------------------------- interfaces with their own HiGHS
def guard_highs(h, time_limit, verbose: bool | None = None) -> None:
    """Make every later ``h.run()`` a :func:`run_highs` of the model and options loaded in ``h`` (options set
    through ``h.setOptionValue`` from now on included), and HiGHS's getters read what it ended with: for an
    interface that drives the HiGHS object itself (Pyomo's appsi_highs), which then reads the point, the bound
    and the status (a deadline stop as the time limit) as if HiGHS had returned them. ``verbose``: whether
    HiGHS's log is wanted (None: as the object's ``output_flag`` and ``log_to_console`` say)."""
    import highspy

    last: list = []
    set_later: dict = {}
    real_set = h.setOptionValue

    def set_option(name, value):
        set_later[name] = value
        return real_set(name, value)

    def run():
        options = {**changed_options(h), **set_later}
        logs = bool(options.pop("output_flag", True)) and bool(options.pop("log_to_console", True))
        last[:] = [run_highs(lp_arrays(h), options, time_limit, verbose=logs if verbose is None else verbose)]
        return highspy.HighsStatus.kOk

    h.setOptionValue = set_option
    h.run = run
    h.getModelStatus = lambda: last[0].status
    h.getInfo = lambda: last[0].info
    h.getSolution = lambda: last[0].solution
    h.getRunTime = lambda: last[0].run_time


# guarded_highs_objects' state: one replacement class for the process while any block is open (counted under
# the lock), and per thread the limits of its open blocks, so that only objects made inside a block are guarded
_GUARDS = threading.local()
_GUARD_LOCK = threading.Lock()
_GUARD_STATE = {"open": 0, "real": None}


@contextmanager
def guarded_highs_objects(time_limit, verbose: bool | None = None):
    """Within the block, every ``highspy.Highs`` object this thread makes (by an interface that makes its own,
    cvxpy's HIGHS) runs through :func:`guard_highs` with ``time_limit`` and ``verbose``. ``highspy.Highs`` is
    replaced for the process while any block is open; objects made by other threads outside a block stay plain,
    and the real class comes back when the last block closes (blocks may nest and overlap across threads)."""
    import highspy

    with _GUARD_LOCK:
        if _GUARD_STATE["open"] == 0:
            real = highspy.Highs

            class GuardedHighs(real):
                _dpopt_guarded = True

                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    mine = getattr(_GUARDS, "limits", None)
                    if mine:
                        guard_highs(self, *mine[-1])

            _GUARD_STATE["real"] = real
            highspy.Highs = GuardedHighs
        _GUARD_STATE["open"] += 1
    limits = _GUARDS.__dict__.setdefault("limits", [])
    limits.append((time_limit, verbose))
    try:
        yield
    finally:
        limits.pop()
        with _GUARD_LOCK:
            _GUARD_STATE["open"] -= 1
            if _GUARD_STATE["open"] == 0:
                highspy.Highs = _GUARD_STATE["real"]
