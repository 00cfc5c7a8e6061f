"""HiGHS's process-wide state, in one place (not a backend: ``_`` modules are not registered): its banner and
its thread scheduler.

HiGHS (≥ 1.16) prints a copyright banner on stdout when the first ``Highs`` object of a process is made,
which would reach stdout (and break ``--json`` output piped to another program). :func:`new_highs` makes
every HiGHS object dpopt uses, and :func:`absorb_highs_banner` makes the first one with its output sent
nowhere before a model is handed to Pyomo's or cvxpy's HiGHS interface.

HiGHS runs every solve of a process on one global task scheduler, created with ``threads`` workers at the
first solve and never resized: a later solve asking for another ``threads`` value fails before it starts
(Pyomo reports "termination unknown"). dpopt honours ``solver_options={"threads": t}`` by resetting that
scheduler before a solve that sets it (:func:`prepare_threads`), so the value asked for is the value used,
whatever ran before in the process; the value is checked first (:func:`check_threads`): HiGHS starts as
many threads as it is told, and a million never finish starting.

The scheduler's worker threads do not survive ``fork``: a HiGHS solve in a forked child of a process that
had solved with HiGHS waited forever for them (multiprocessing's default start method on Linux). A fork
hook resets the scheduler in the child (:func:`_reset_after_fork`), so the child's first solve starts its own.
"""

from __future__ import annotations

import math
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .. import _validate as V
from ._output import descriptor_output


def max_threads() -> int:
    """The most HiGHS threads dpopt accepts: this machine's logical cores (more are never faster)."""
    return max(os.cpu_count() or 1, 1)


def check_threads(value) -> int:
    """HiGHS's ``threads`` option: an integer in [0, :func:`max_threads`] (0: HiGHS's own choice, half the
    cores). Raises InvalidOption naming the option and the range."""
    top = max_threads()
    try:
        return V.count("solver_options['threads']", value, minimum=0, maximum=top)
    except V.InvalidOption as exc:
        raise V.InvalidOption(f"{exc} (HiGHS threads: 0 for HiGHS's choice, at most this machine's {top} "
                              f"logical cores)") from None


def prepare_threads(options: dict) -> None:
    """Before a HiGHS solve with ``options``: when they set ``threads``, check it and reset HiGHS's global
    scheduler so that the solve starts it with that many threads (no effect otherwise)."""
    if "threads" not in options:
        return
    check_threads(options["threads"])
    try:
        import highspy
    except ImportError:     # no HiGHS: the solve reports it
        return
    reset = getattr(highspy.Highs, "resetGlobalScheduler", None)
    if reset is not None:
        reset(True)


def _reset_after_fork() -> None:
    """In a forked child: drop the parent's HiGHS scheduler (its threads are gone) without waiting for them."""
    highspy = sys.modules.get("highspy")
    reset = getattr(getattr(highspy, "Highs", None), "resetGlobalScheduler", None)
    if reset is not None:
        try:
            reset(False)
        except Exception:  # noqa: BLE001 - never let a fork fail over HiGHS
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


_BANNER_SHOWN = False


def absorb_highs_banner() -> None:
    """Make the process's first HiGHS object with its output sent nowhere, so that the banner HiGHS prints
    then is not printed later by Pyomo's or cvxpy's HiGHS interface (call before handing a model to them)."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        return
    import highspy

    with descriptor_output(False):
        highspy.Highs()
    _BANNER_SHOWN = True


def new_highs(verbose: bool = False):
    """A ``highspy.Highs`` object with its log on stderr when ``verbose``, else silent; the banner of the
    process's first HiGHS object goes nowhere."""
    import highspy

    absorb_highs_banner()
    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(verbose))
    return h


#: seconds past ``time_limit`` by which a HiGHS solve has returned whatever HiGHS does: then the process running
#: HiGHS is killed (:func:`run_highs`). The exact route's own HiGHS and Pyomo's appsi_highs both go through it.
HARD_DEADLINE_GRACE = 0.5

#: seconds past ``time_limit`` after which a MIP callback interrupts HiGHS (which then returns its point and bound
#: itself, before the kill would)
INTERRUPT_GRACE = 0.125

#: seconds between two bound messages from a HiGHS process (its MIP callback runs thousands of times a second)
_BOUND_EVERY = 0.05


@dataclass
class HighsRun:
    """What one HiGHS run ended with, in HiGHS's own terms (the getters' values, read once): ``status`` a
    ``HighsModelStatus`` (``kTimeLimit`` when dpopt's deadline stopped it, whichever way), ``info`` HiGHS's info
    fields, ``solution`` its point (``col_value``, ``row_value``, ``col_dual``, ``row_dual``, ``value_valid``,
    ``dual_valid``), ``run_time`` seconds. ``killed``: HiGHS did not return by the deadline and its process was
    killed; the point and bound are then the last ones HiGHS reported through its callbacks (an incumbent it had
    found, a bound it had proven), and the duals and row values are absent."""
    status: object
    info: SimpleNamespace
    solution: SimpleNamespace
    run_time: float
    killed: bool = False


def run_highs(h, time_limit, report=None, columns: int | None = None) -> HighsRun:
    """Run HiGHS on the model loaded in ``h`` with ``time_limit`` (seconds; None: no limit) as a hard deadline.

    HiGHS's own limit can be overrun, and not only where a callback could stop it: its MIP presolve checks
    neither its clock nor the interrupt callback (:func:`fit_presolve`), and a benchmark run found a MIP looping
    in its node queue (``HighsNodeQueue::link_estim``) for over 40 minutes. So with a limit, HiGHS runs in a
    forked child process: a MIP callback there interrupts it once the limit plus :data:`INTERRUPT_GRACE` has
    passed, every incumbent and (at most every 50 ms) the bound reach this process as HiGHS finds them, and a
    child still running at the limit plus :data:`HARD_DEADLINE_GRACE` is killed; the run then ends with status
    ``kTimeLimit`` and the last incumbent and bound received. A child that dies otherwise ends with
    ``kSolveError`` (and its last incumbent). The child inherits the loaded model, so nothing is copied up front;
    a run costs about 10 ms more (measured: fork, the child's HiGHS threads, the answer's transfer). Where
    ``os.fork`` does not exist HiGHS runs in this process with the callback stop only.

    ``report(primal, dual)`` (optional) receives HiGHS's incumbent value and bound (HiGHS's objective units) as
    it runs, for progress lines (:class:`dpopt.progress.BoundProgress`). ``columns``: only the first ``columns``
    values of the point are kept (and sent between the processes), with no duals or row values."""
    import highspy

    run = type(h).run           # HiGHS's own (``h.run`` itself may be the guarded one: :func:`guard_highs`)
    if time_limit is None and report is None:
        run(h)
        return _snapshot(h, columns)
    fit_presolve(h, time_limit)
    if time_limit is None or not hasattr(os, "fork"):
        stopped = _subscribe(h, time_limit, report, None, columns)
        run(h)
        return _snapshot(h, columns, stopped=bool(stopped))
    import multiprocessing
    import signal
    import time
    import warnings

    start = time.monotonic()
    kill_at = start + max(float(time_limit), 1e-3) + HARD_DEADLINE_GRACE
    receive, send = multiprocessing.Pipe(duplex=False)
    with warnings.catch_warnings():     # Python >= 3.12 warns on fork in a threaded process; the child only
        warnings.simplefilter("ignore", DeprecationWarning)   # runs HiGHS (its scheduler is reset at fork)
        pid = os.fork()
    if pid == 0:                                                     # the child: run, send, never return
        code = 0
        try:
            receive.close()
            stopped = _subscribe(h, time_limit, None, send, columns)
            run(h)
            send.send(("done", _snapshot(h, columns, stopped=bool(stopped))))
        except BaseException:       # noqa: BLE001 - the parent reads a missing "done" as a failed run
            code = 1
        finally:
            os._exit(code)
    send.close()
    incumbent = None                # (objective, point) last received
    bound = (math.inf, -math.inf, -1)   # (primal, dual, nodes) last received
    done = None
    died = False                    # the child ended without an answer before the deadline
    try:
        while done is None:
            wait = kill_at - time.monotonic()
            if wait <= 0 or not receive.poll(wait):
                break
            try:
                message = receive.recv()
            except EOFError:
                died = True
                break
            if message[0] == "incumbent":
                incumbent = message[1:]
            elif message[0] == "bound":
                bound = message[1:]
                if report is not None:
                    report(bound[0], bound[1])
            else:
                done = message[1]
    finally:
        if done is None and not died:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        receive.close()
        _EXITING.append(pid)        # reaped at the next run (a child's exit takes ~4 ms; nothing waits on it)
        _reap()
    if done is not None:
        return done
    status = highspy.HighsModelStatus.kSolveError if died else highspy.HighsModelStatus.kTimeLimit
    return _last_reported(status, incumbent, bound, time.monotonic() - start, killed=not died)


_EXITING: list = []     # children of run_highs not yet reaped


def _reap(block: bool = False) -> None:
    """Reap the children of :func:`run_highs` that have exited (all of them, waiting, when ``block``)."""
    for pid in list(_EXITING):
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:    # already reaped (e.g. by a SIGCHLD handler of the application)
            done = pid
        if done:
            _EXITING.remove(pid)


if hasattr(os, "fork"):
    import atexit

    atexit.register(_reap, True)


def _subscribe(h, time_limit, report, channel, columns) -> list:
    """HiGHS's MIP callbacks for :func:`run_highs`: past the limit plus :data:`INTERRUPT_GRACE`, interrupt HiGHS;
    give ``report`` the incumbent value and bound, and send them (and every incumbent's point) on ``channel``
    when given. Returns a list that holds True once the deadline interrupted HiGHS."""
    import time

    stopped: list = []
    hard = None if time_limit is None else time.monotonic() + max(float(time_limit), 1e-3) + INTERRUPT_GRACE
    last_sent = [-math.inf]

    def on_interrupt(event):
        d = event.data_out
        if report is not None:
            report(d.mip_primal_bound, d.mip_dual_bound)
        now = time.monotonic()
        if channel is not None and now - last_sent[0] >= _BOUND_EVERY:
            last_sent[0] = now
            channel.send(("bound", float(d.mip_primal_bound), float(d.mip_dual_bound), int(d.mip_node_count)))
        if hard is not None and now > hard:
            stopped.append(True)
            event.interrupt()

    h.cbMipInterrupt.subscribe(on_interrupt)
    if channel is not None:
        def on_incumbent(event):
            d = event.data_out
            point = np.array(d.mip_solution, dtype=float)
            channel.send(("incumbent", float(d.objective_function_value),
                          point if columns is None else point[:columns]))

        h.cbMipImprovingSolution.subscribe(on_incumbent)
    return stopped


def _snapshot(h, columns, stopped: bool = False) -> HighsRun:
    """The state of ``h`` after a run (an interrupt by dpopt's deadline read as the time limit)."""
    import highspy

    cls = type(h)               # HiGHS's own getters (the instance's may be guard_highs's)
    status = cls.getModelStatus(h)
    if stopped and status == highspy.HighsModelStatus.kInterrupt:
        status = highspy.HighsModelStatus.kTimeLimit
    raw = cls.getInfo(h)
    info = SimpleNamespace(**{name: getattr(raw, name) for name in dir(raw)
                              if not name.startswith("_") and not callable(getattr(raw, name))})
    sol = cls.getSolution(h)
    if columns is None:
        solution = SimpleNamespace(col_value=np.asarray(sol.col_value, dtype=float),
                                   row_value=np.asarray(sol.row_value, dtype=float),
                                   col_dual=np.asarray(sol.col_dual, dtype=float),
                                   row_dual=np.asarray(sol.row_dual, dtype=float),
                                   value_valid=bool(sol.value_valid), dual_valid=bool(sol.dual_valid))
    else:
        empty = np.zeros(0)
        solution = SimpleNamespace(col_value=np.asarray(sol.col_value, dtype=float)[:columns], row_value=empty,
                                   col_dual=empty, row_dual=empty, value_valid=bool(sol.value_valid),
                                   dual_valid=False)
    return HighsRun(status, info, solution, float(cls.getRunTime(h)))


def _last_reported(status, incumbent, bound, run_time, killed) -> HighsRun:
    """A run whose process ended without an answer: its last incumbent and bound, as HiGHS's getters would give
    them (every other info field at HiGHS's default; no duals, no row values)."""
    import highspy

    primal, dual, nodes = bound
    have = incumbent is not None
    value = incumbent[0] if have else math.inf
    gap = (abs(value - dual) / max(abs(value), 1e-300)) if have and math.isfinite(dual) else math.inf
    default = highspy.HighsInfo()
    info = SimpleNamespace(**{name: getattr(default, name) for name in dir(default)
                              if not name.startswith("_") and not callable(getattr(default, name))})
    info.__dict__.update(valid=True, objective_function_value=value, mip_dual_bound=dual, mip_gap=gap,
                         mip_node_count=nodes, primal_solution_status=2 if have else 0, dual_solution_status=0)
    empty = np.zeros(0)
    solution = SimpleNamespace(col_value=incumbent[1] if have else empty, row_value=empty, col_dual=empty,
                               row_dual=empty, value_valid=have, dual_valid=False)
    return HighsRun(status, info, solution, run_time, killed=killed)


def guard_highs(h, time_limit) -> None:
    """Make every later ``h.run()`` a :func:`run_highs` with ``time_limit``, and HiGHS's getters read what it
    ended with: for an interface that drives the HiGHS object itself (Pyomo's appsi_highs), which then reads
    the point, the bound and the status (a deadline stop as the time limit) as if HiGHS had returned them."""
    import highspy

    last: list = []

    def run():
        last[:] = [run_highs(h, time_limit)]
        return highspy.HighsStatus.kOk

    h.run = run
    h.getModelStatus = lambda: last[0].status
    h.getInfo = lambda: last[0].info
    h.getSolution = lambda: last[0].solution
    h.getRunTime = lambda: last[0].run_time


@contextmanager
def guarded_highs_objects(time_limit):
    """Within the block, every ``highspy.Highs`` object made (by an interface that makes its own, cvxpy's HIGHS)
    runs through :func:`guard_highs` with ``time_limit``. The block must not run other HiGHS solves beside it
    (``highspy.Highs`` is replaced for the process while it lasts)."""
    import highspy

    real = highspy.Highs

    class GuardedHighs(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            guard_highs(self, time_limit)

    highspy.Highs = GuardedHighs
    try:
        yield
    finally:
        highspy.Highs = real


#: seconds of HiGHS presolve per nonzero of the model, an upper estimate: its MIP presolve checks neither its
#: time limit nor the interrupt callback (measured: 5.5 s on a 194 000-nonzero secant MILP, case (e) at
#: k = 20 000, given a 1.5 s limit; 1.7 s without presolve)
PRESOLVE_SECONDS_PER_NONZERO = 3e-5


def fit_presolve(h, time_limit) -> None:
    """Switch HiGHS's presolve off for the model loaded in ``h`` when ``time_limit`` (seconds left) is below its
    estimated presolve time, so the limit holds; HiGHS then stops on its own clock (no effect without a limit)."""
    if time_limit is not None and float(time_limit) < PRESOLVE_SECONDS_PER_NONZERO * h.getNumNz():
        h.setOptionValue("presolve", "off")
