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

import os
import sys

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


#: seconds past time_limit after which a HiGHS MIP that HiGHS has not stopped is stopped from outside (the exact
#: route's own HiGHS and Pyomo's appsi_highs both read it)
HARD_DEADLINE_GRACE = 0.5


def arm_deadline(h, time_limit, grace: float, report=None) -> list:
    """Make ``time_limit`` a hard deadline for the HiGHS object ``h``: HiGHS's own limit can be overrun (seen:
    minutes in its node queue), so a MIP callback interrupts it from outside once ``time_limit`` plus
    ``grace`` seconds have passed. ``report(primal, dual)`` (optional) receives HiGHS's incumbent and bound
    (HiGHS's objective units) at each callback, for progress lines (:class:`dpopt.progress.BoundProgress`).

    The callback is not called during HiGHS's presolve, so presolve is switched off where it would not fit in
    the limit (:func:`fit_presolve`).

    Returns a list that holds True once the deadline stopped the solve (HiGHS's status is then "interrupted",
    which the caller reads as the time limit). Nothing is subscribed without a limit or a report."""
    import time

    stopped: list = []
    if time_limit is None and report is None:
        return stopped
    fit_presolve(h, time_limit)
    hard = None if time_limit is None else time.monotonic() + max(float(time_limit), 1e-3) + grace

    def on_event(event):
        if report is not None:
            d = event.data_out
            report(d.mip_primal_bound, d.mip_dual_bound)
        if hard is not None and time.monotonic() > hard:
            stopped.append(True)
            event.interrupt()

    h.cbMipInterrupt.subscribe(on_event)
    return stopped


#: seconds of HiGHS presolve per nonzero of the model, an upper estimate: its MIP presolve checks neither its
#: time limit nor the interrupt callback (measured: 5.5 s on a 194 000-nonzero secant MILP, case (e) at
#: k = 20 000, given a 1.5 s limit; 1.7 s without presolve)
PRESOLVE_SECONDS_PER_NONZERO = 3e-5


def fit_presolve(h, time_limit) -> None:
    """Switch HiGHS's presolve off for the model loaded in ``h`` when ``time_limit`` (seconds left) is below its
    estimated presolve time, so the limit holds; HiGHS then stops on its own clock (no effect without a limit)."""
    if time_limit is not None and float(time_limit) < PRESOLVE_SECONDS_PER_NONZERO * h.getNumNz():
        h.setOptionValue("presolve", "off")
