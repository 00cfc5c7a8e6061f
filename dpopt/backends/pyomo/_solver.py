"""What the Pyomo backends share: solver names, the option vocabulary, one status map and the solve call.
(Not a backend: modules starting with ``_`` are not registered.)

Solver names
    Pyomo's ``SolverFactory`` treats a name it does not know as a program to run (a path, ``"asl:/path"``,
    any executable on PATH). No user string ever reaches it: :func:`solver_key` looks the name up in
    :data:`SOLVERS`, dpopt's allow-list (case-insensitive), and only the Pyomo factory name stored there is
    used. Any other name gives status ``unsupported`` with the allowed names; nothing is executed.

Options (the same five for every family, after Pyomo's ``SolverConfig``)
    ``solver``          dpopt's name of the solver (:data:`SOLVERS`), case-insensitive;
    ``time_limit``      seconds in (0, 1e7] (:data:`dpopt._validate.MAX_TIME_LIMIT`); ``None`` means
                        :data:`DEFAULT_TIME_LIMIT` (300 s), so an external solver never runs unbounded; the
                        limit used is ``details["time_limit"]``;
    ``rel_gap``         relative optimality gap in [0, 1) at which the solver may stop (default: the family's
                        own, 0 for integer designs); the answer's own certificate decides its status whatever
                        gap the solver stopped at: ``optimal`` when the exchange certificate holds, or the gap
                        to the solver's bound is within rel_gap (:func:`dpopt.result.gap_proves`);
    ``verbose``         the solver's log on stderr (written straight to the file descriptor, never through
                        a pipe: Pyomo's output capture dead-locks SCIP when its log exceeds a pipe buffer);
    ``solver_options``  a dict passed straight to the solver after dpopt's own settings (so it may override
                        them); SCIP's and HiGHS's parameter names and values are checked on a
                        throw-away solver object first (InvalidOption naming the parameter). The solver's
                        own time limit is refused (use ``time_limit``); HiGHS's ``threads`` is honoured by
                        resetting its process-wide scheduler (:mod:`dpopt.backends._highs`).

    Pyomo's factory names (``solver="scip_direct"``) raise :class:`~dpopt._validate.InvalidOption` naming
    dpopt's name; any other option raises :class:`UnknownOption` naming it.
"""

from __future__ import annotations

import logging
import math
from contextlib import contextmanager
from dataclasses import dataclass, field

from ... import _validate as V
from ..._validate import InvalidOption
from ...options import DEFAULT_TIME_LIMIT, time_limit_or_default  # noqa: F401  (DEFAULT_TIME_LIMIT: re-exported)
from ...result import Status
from .. import _status
from .._highs import absorb_highs_banner, check_threads, new_highs, prepare_threads
from .._highs_run import guard_highs
from .._output import descriptor_output

#: dpopt's solver names → Pyomo factory names. The only solver names the pyomo backends accept.
SOLVERS: dict[str, str] = {"scip": "scip_direct", "highs": "appsi_highs", "ipopt": "ipopt"}
#: What each solver is (shown with the allowed names).
SOLVER_USE = {"scip": "SCIP via PySCIPOpt", "highs": "HiGHS via highspy", "ipopt": "IPOPT, continuous only"}
OPTIONS = ("solver", "time_limit", "rel_gap", "verbose", "solver_options")


class UnknownOption(InvalidOption, TypeError):
    """An option the pyomo backend does not take (an InvalidOption, so it reaches the caller; also a
    TypeError, like any unexpected keyword argument)."""


@contextmanager
def quiet_pyomo_log():
    """Silence Pyomo's log during a solve (e.g. "Loading a SolverResults object with an 'aborted' status"):
    what matters is reported through ``Solution.status`` and its message."""
    log = logging.getLogger("pyomo")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


# ---------------------------------------------------------------------------------- names and options
def allowed_text(allowed) -> str:
    return ", ".join(f"{k!r} ({SOLVER_USE[k]})" for k in allowed)


def solver_key(solver, allowed) -> str | None:
    """dpopt's canonical solver name (``"SCIP"`` → ``"scip"``) if it is one of ``allowed``, else None.

    Pyomo's own factory names (``"scip_direct"``, ``"appsi_highs"``) raise InvalidOption naming dpopt's
    name. Nothing else about the string is interpreted: it never reaches Pyomo."""
    if not isinstance(solver, str):
        return None
    key = solver.strip().lower()
    for name, factory in SOLVERS.items():
        if key == factory and key != name and name in allowed:
            raise InvalidOption(f"solver={solver!r} is Pyomo's name; use solver={name!r}")
    return key if key in allowed else None


def unknown_solver_message(solver, allowed, what: str = "this model") -> str:
    shown = solver if isinstance(solver, str) and len(solver) <= 80 else f"{str(solver)[:77]}..."
    return f"solver {shown!r} is not supported by the pyomo backend for {what}; allowed: {allowed_text(allowed)}"


def reject_unknown_options(extra: dict, where: str = "the pyomo backend") -> None:
    """Raise for options outside the vocabulary, naming them."""
    if extra:
        raise UnknownOption(f"unknown option(s) {', '.join(map(repr, sorted(extra)))} for {where}")


@dataclass
class SolveOptions:
    """The checked common options of one pyomo solve."""

    time_limit: float                 # seconds actually given (never None)
    time_limit_default: bool          # True when the caller passed None
    rel_gap: float | None             # None: the family's default
    verbose: bool
    solver_options: dict = field(default_factory=dict)

    def note(self) -> str:
        """Words for a message: which time limit applied."""
        src = "default" if self.time_limit_default else "given"
        return f"time limit {self.time_limit:g} s ({src})"

    def details(self) -> dict:
        return {"time_limit": self.time_limit, "time_limit_default": self.time_limit_default}


def check_options(time_limit, rel_gap, verbose, solver_options, extra: dict,
                  where: str = "the pyomo backend") -> SolveOptions:
    """Validate the common options (InvalidOption naming the option) and reject old names."""
    reject_unknown_options(extra, where)
    # dpopt's one validator per option (the registry runs the same ones; direct calls of a backend
    # function or of solve_pyomo_model reach these)
    tl = V.time_limit(time_limit)
    if rel_gap is not None:
        rel_gap = V.rel_gap(rel_gap)
    verbose = V.verbose(verbose)
    solver_options = V.solver_options(solver_options)
    return SolveOptions(time_limit_or_default(tl), tl is None, rel_gap, verbose,
                        dict(solver_options))


#: each solver's own time-limit parameter: set from ``time_limit`` only (refused in ``solver_options``)
_TIME_PARAMETER = {"scip": "limits/time", "highs": "time_limit", "ipopt": "max_cpu_time"}


def check_solver_options(key: str, solver_options: dict) -> None:
    """Refuse solver parameters the solver does not have or values it would reject or silently change
    (InvalidOption naming them), before any model is built: each is set on a throw-away solver object."""
    if not solver_options:
        return
    own = _TIME_PARAMETER.get(key)
    if own in solver_options:
        # dpopt's time_limit is the one (capped, always finite) limit of a solver call
        raise InvalidOption(f"solver_options for {key}: {own!r} is the solver's time limit; use the time_limit "
                            f"option (seconds in (0, {V.MAX_TIME_LIMIT:g}])")
    bad = []
    if key == "scip":
        try:
            import pyscipopt
        except ImportError:   # the solver is missing: reported as unsupported later
            return
        probe = pyscipopt.Model()
        known = probe.getParams()
        for name, value in solver_options.items():
            if name not in known:
                bad.append(f"{name!r} (no such SCIP parameter)")
                continue
            kind = type(known[name])
            ok_type = (isinstance(value, bool) if kind is bool else
                       isinstance(value, int) and not isinstance(value, bool) if kind is int else
                       isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
                       isinstance(value, kind))
            if not ok_type:
                bad.append(f"{name!r} = {value!r} (SCIP expects {kind.__name__})")
                continue
            with solver_output(False):      # SCIP prints its own complaint
                try:
                    probe.setParam(name, value)
                except (ValueError, TypeError, LookupError) as exc:
                    bad.append(f"{name!r} = {value!r} ({exc})")
    elif key == "highs":
        try:
            import highspy
        except ImportError:
            return
        if "threads" in solver_options:
            check_threads(solver_options["threads"])     # process-wide in HiGHS: see backends/_highs.py
        probe = new_highs()
        ok = highspy.HighsStatus.kOk
        with solver_output(False):          # HiGHS prints its own complaint
            for name, value in solver_options.items():
                status, current = probe.getOptionValue(name)
                if status != ok:
                    bad.append(f"{name!r} (no such HiGHS option)")
                elif isinstance(value, bool) != isinstance(current, bool) or probe.setOptionValue(name, value) != ok:
                    bad.append(f"{name!r} = {value!r} (rejected by HiGHS)")
    if bad:
        raise InvalidOption(f"solver_options for {key}: {'; '.join(bad)}")


# ---------------------------------------------------------------------------------- statuses
def status_of(termination, has_point: bool) -> Status:
    """One map from Pyomo's termination condition to :class:`Status` for every pyomo backend.

    A user interrupt (SCIP and HiGHS catch SIGINT themselves and return) is raised as KeyboardInterrupt:
    the command stops instead of reporting a row as ``error``. (The map is
    :data:`dpopt.backends._status.PYOMO`.)"""
    return _status.status_of("pyomo", termination, has_point)


# ---------------------------------------------------------------------------------- the solve call
def open_solver(key: str):
    """``(solver object, None)`` for an allow-listed name, or ``(None, reason)`` when it is not installed."""
    import pyomo.environ as pe

    factory = SOLVERS[key]          # never a user string: KeyError for a name not in the allow-list
    try:
        opt = pe.SolverFactory(factory)
        ok = bool(opt.available(exception_flag=False))
    except Exception:  # noqa: BLE001 - a broken solver plug-in counts as missing
        ok = False
    if not ok:
        return None, f"solver {key!r} (Pyomo {factory!r}) is not available: install it to use solver={key!r}"
    return opt, None


def limit_options(key: str, opts: SolveOptions, time_limit: float | None = None) -> dict:
    """The time limit and relative gap in the solver's own parameter names (``time_limit`` overrides the
    options' limit, e.g. what is left after building the model)."""
    tl = opts.time_limit if time_limit is None else time_limit
    out: dict = {}
    if key == "scip":
        out["limits/time"] = float(tl)
        out["timing/clocktype"] = 2      # wall clock (the default CPU clock can stall while SCIP waits)
        if opts.rel_gap is not None:
            out["limits/gap"] = opts.rel_gap
    elif key == "highs":
        out["time_limit"] = float(tl)
        if opts.rel_gap is not None:
            out["mip_rel_gap"] = opts.rel_gap
    elif key == "ipopt":
        out["max_cpu_time"] = float(tl)
    return out


@contextmanager
def solver_output(verbose: bool):
    """Route what the solver writes to file descriptors 1 and 2 (stderr when verbose, else nowhere; see
    :func:`dpopt.backends._output.descriptor_output`), with Pyomo's own capture of SCIP's output through a
    pipe switched off: it dead-locks once SCIP's log exceeds the pipe buffer (PySCIPOpt holds the GIL while
    SCIP runs, so the draining thread never runs)."""
    with descriptor_output(verbose), _no_pyomo_scip_capture():
        yield


@contextmanager
def _no_pyomo_scip_capture():
    """Replace ``capture_output`` inside Pyomo's scip_direct by a no-op for the duration of a solve."""
    try:
        from pyomo.contrib.solver.solvers.scip import scip_direct as mod
    except ImportError:   # another Pyomo layout: its capture stays (SCIP is kept quiet by verblevel 0)
        yield
        return
    real = getattr(mod, "capture_output", None)
    if real is None:
        yield
        return
    mod.capture_output = _NoCapture
    try:
        yield
    finally:
        mod.capture_output = real


class _NoCapture:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run(opt, key: str, m, options: dict, verbose: bool):
    """Solve the Pyomo model ``m`` with ``options`` (solver parameter names); the solver's output goes to
    stderr (verbose) or nowhere. Returns ``(status, termination, results, has_point)`` with the point
    loaded into ``m`` when the solver has one (else every variable's value is cleared, so that starting
    values are never read as an answer). Raises KeyboardInterrupt when the solver was interrupted."""
    import pyomo.environ as pe

    if key == "scip":
        options = {"display/verblevel": 4 if verbose else 0, **options}
    elif key == "highs":
        prepare_threads(options)    # HiGHS's scheduler is process-wide: reset it when threads is set
        absorb_highs_banner()       # before the output is redirected (the banner's redirect is not re-entrant)
    with quiet_pyomo_log(), solver_output(verbose), paused_gc():
        if key == "highs":
            _hard_deadline(opt, m, options.get("time_limit"), verbose)
        # SCIP's log reaches the descriptors directly (Pyomo's tee would pipe it); the others' through Pyomo
        results = opt.solve(m, load_solutions=False, tee=verbose and key != "scip", options=options)
        tc = results.solver.termination_condition
        _status.record(tc)
        has_point = len(results.solution) > 0
        if has_point:
            m.solutions.load_from(results)
    if not has_point:
        for var in m.component_data_objects(pe.Var, descend_into=True):
            var.set_value(None, skip_validation=True)
    return status_of(tc, has_point), tc, results, has_point


def _hard_deadline(opt, m, time_limit, verbose: bool) -> None:
    """Make ``time_limit`` a hard deadline for Pyomo's appsi_highs: HiGHS's own limit can be overrun, and
    Pyomo offers no outside stop. The model is handed to the solver first (``set_instance``; the solve that
    follows finds it there and only updates it), and the HiGHS object it made then runs through
    :func:`dpopt.backends._highs_run.guard_highs`: in a worker process stopped (interrupted, then killed) once the
    limit plus ``HARD_DEADLINE_GRACE`` has passed, that stop read as HiGHS's time limit, so Pyomo keeps the point
    and the bound HiGHS had (it maps an interrupt to "unknown" and drops them); HiGHS's log is passed on when
    ``verbose``. No effect on another interface or without a limit."""
    if time_limit is None or not hasattr(opt, "set_instance"):
        return
    opt.set_instance(m)
    h = getattr(opt, "_solver_model", None)
    if h is None or not hasattr(h, "cbMipInterrupt"):
        return
    guard_highs(h, time_limit, verbose)


#: Pyomo hands a built model to the solver (scip_direct and appsi_highs walk every expression) before the
#: solver's clock starts, and that hand-over cannot be interrupted. Measured on the secant MILP at k = 60 (281 k
#: rows, 562 k nonzeros; 2 loaded cores, Python's garbage collector paused as :func:`paused_gc` does): build
#: 1.5-3.0 s, hand-over 5.1-6.5 s to SCIP and 11.4 s to HiGHS. A build projects its hand-over as this multiple
#: of its own build time (IPOPT goes through a file written by Pyomo: as SCIP).
HANDOVER_PER_BUILD = {"scip": 4.0, "highs": 5.0, "ipopt": 4.0}


@contextmanager
def paused_gc():
    """Python's cyclic garbage collector paused while a Pyomo model is built and handed over: the hundreds of
    thousands of expression objects otherwise trigger collections over all of them (the secant MILP's build at
    k = 60 took 3.9-5.1 s with it, 1.5-2.0 s without)."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class OutOfTime(Exception):
    """Building a Pyomo model and handing it to the solver would not end within ``time_limit``: the route
    returns status ``time_limit`` with no point (the message says how far the build got)."""


class BuildClock:
    """The clock of one Pyomo route: the deadline is ``start + time_limit`` (``time.perf_counter`` seconds), the
    build calls :meth:`tick` as it writes its ``units`` (rows, terms), and is stopped (:class:`OutOfTime`) as
    soon as the time it has taken per unit projects the rest of the build plus the hand-over
    (:data:`HANDOVER_PER_BUILD`) past the deadline; :meth:`solver_time` is what is then left for the solver
    itself. The rate is measured on this machine in this call, so a loaded machine stops earlier."""

    CHECK_EVERY = 2048           # units between two looks at the clock

    def __init__(self, start: float, time_limit: float, units: int, what: str = "the model", solver: str = "scip"):
        import time

        self._now = time.perf_counter
        self.start, self.time_limit, self.deadline = start, float(time_limit), start + float(time_limit)
        self.units, self.what = max(int(units), 1), what
        self.build_start = self._now()
        self.done = 0
        self.handover = HANDOVER_PER_BUILD.get(solver, max(HANDOVER_PER_BUILD.values()))
        self._next = self.CHECK_EVERY
        self._first = None

    def elapsed_build(self) -> float:
        return self._now() - self.build_start

    def check(self, done: int | None = None) -> None:
        """Raise :class:`OutOfTime` when the projected end of build and hand-over is past the deadline. The rate
        per unit is measured from the first look at the clock on (the first units carry Pyomo's one-off
        set-up, several times a unit's cost); until then only a build already past the deadline stops."""
        if done is not None:
            self.done = done
        now = self._now()
        built = now - self.build_start
        if self._first is None:
            self._first = (now, self.done)
            rate = 0.0
        else:
            rate = (now - self._first[0]) / max(self.done - self._first[1], 1)
        rest = rate * max(self.units - self.done, 0)
        if now > self.deadline:
            raise OutOfTime(f"the time limit {self.time_limit:g} s passed while building {self.what} ({self.done} "
                            f"of {self.units} units in {built:.3g} s)")
        if now + rest + self.handover * (built + rest) > self.deadline:
            raise OutOfTime(f"building {self.what} ({self.done} of {self.units} units in {built:.3g} s) and "
                            f"handing it to the solver through Pyomo would take about "
                            f"{(rest + self.handover * (built + rest)):.3g} s more, beyond the time limit "
                            f"{self.time_limit:g} s")

    def tick(self, done: int) -> None:
        """Record ``done`` units written; look at the clock once :data:`CHECK_EVERY` more units are written."""
        self.done = done
        if done >= self._next:
            self._next = done + self.CHECK_EVERY
            self.check()

    def solver_time(self) -> float:
        """Seconds left for the solver once the model is built (the hand-over's share taken off); raises
        :class:`OutOfTime` when nothing would be left."""
        self.check(self.units)
        left = self.deadline - self._now() - self.handover * self.elapsed_build()
        return max(left, 1e-3)


def lower_bound(results) -> float:
    """The solver's dual (lower) bound in the model's own objective units, or nan."""
    try:
        lb = float(results.problem.lower_bound)
    except (TypeError, ValueError, AttributeError):
        return float("nan")
    return lb if math.isfinite(lb) else float("nan")
