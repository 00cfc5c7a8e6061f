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
    from ._highs_worker import reset_scheduler

    reset_scheduler(highspy.Highs)


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


#: seconds of HiGHS presolve per nonzero of the model, an upper estimate: its MIP presolve checks neither its
#: time limit nor the interrupt callback (measured: 5.5 s on a 194 000-nonzero secant MILP, case (e) at
#: k = 20 000, given a 1.5 s limit; 1.7 s without presolve)
PRESOLVE_SECONDS_PER_NONZERO = 3e-5


def presolve_fits(nonzeros: int, time_limit) -> bool:
    """Whether HiGHS's presolve of a model with ``nonzeros`` fits in ``time_limit`` (seconds left; None: no
    limit) by its upper estimate."""
    return time_limit is None or float(time_limit) >= PRESOLVE_SECONDS_PER_NONZERO * nonzeros


def fit_presolve(h, time_limit) -> None:
    """Switch HiGHS's presolve off for the model loaded in ``h`` when ``time_limit`` (seconds left) is below its
    estimated presolve time, so the limit holds; HiGHS then stops on its own clock (no effect without a limit)."""
    if not presolve_fits(h.getNumNz(), time_limit):
        h.setOptionValue("presolve", "off")
