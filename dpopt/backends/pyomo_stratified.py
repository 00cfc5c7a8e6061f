"""``pyomo`` backend for StratifiedDesign and MinCostDesign (docs/stratified.md, docs/constrained.md).

:func:`build_pyomo_model` returns a Pyomo ``ConcreteModel`` that analysts may extend (``m.n[i]`` are the
sample sizes, ``m.extra`` is an empty ``ConstraintList`` for their own constraints) before solving it
themselves or through :func:`solve_pyomo_model`.

Formulations
------------
``"minlp"``: the objective Σ f_i(n_i) written in closed form (Laplace: ``2Δ²/log(1 + cN/n)²``; DLap with
Δ = 1 and TuLap: ``a/n + b·n + const``, exact; DLap with Δ > 1: ``2p/(1−p)²`` with ``p = (n/(n+cN))^{1/Δ}``),
solved by SCIP through PySCIPOpt (Pyomo's ``scip_direct``). No coefficient exceeds ~1e15 in magnitude
(SCIP's infinity is 1e20) for ε from 1e-6 to 700: when cN > e^34 the amplified budget is written in log
space, ``log1p(cN/n) = u + log(1 + e^{−u})`` with ``u = log(cN) − log(n)`` (the second term dropped when it
is below double precision); for DLap with Δ > 1 and cN ≤ 1 the variance is written without the
cancellation in ``1 − p``. The objective is divided by a positive
constant ``m.objective_scale`` (reported, folded into the weights) to keep SCIP's tolerances meaningful; ``m.g`` is the unscaled
expression. Integer or continuous (``integer=False``: the relaxation, solved by SCIP's spatial branch and
bound, or IPOPT when it is installed and asked for).

``"milp"``: the incremental form ``n_i = lo_i + Σ_m δ_im``, cost ``Σ d_i(m) δ_im`` with the model's exact
unit increments ``model.increments`` (plus Σ f_i(lo_i)); δ binary. With non-decreasing increments the
chosen units form a prefix (ordering constraints are added automatically if the increments are not
monotone, e.g. a user mechanism), so the MILP optimum is the integer optimum. Solved by HiGHS
(``appsi_highs``); for the plain sum problem the δ are continuous, because that LP is integral. Its LP relaxation (``integer=False``) is the piecewise-linear interpolation, *not* the
continuous relaxation of the model. For the sum problem the ranges are first tightened with the sum
(``n_i ≤ η − Σ_{j≠i} lo_j``); the number of δ variables is limited by ``max_milp_vars``.

Solve options: ``solver`` ("scip" | "highs" | "ipopt"), ``time_limit`` (s), ``mip_gap`` (relative;
default 0 = proven optimum), ``formulation`` (default: "minlp" for SCIP/IPOPT, "milp" for HiGHS),
``tee``. Solver statuses map onto ``Solution.status``; an unknown or missing solver gives ``unsupported``
(solver names are case-insensitive). A non-optimal answer (time limit, feasible) carries a point only when
the point satisfies the model to ``FEASIBILITY_TOL`` (relative); an ``infeasible`` claim from the solver on a
model with a known feasible point (e.g. the plain sum-and-bounds problem) is reported as ``error``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _validate as V
from ..models.min_cost import MinCostDesign
from ..models.stratified import StratifiedDesign
from ..registry import register
from ..result import Certificate, Solution, Status
from ._pyomo import quiet_pyomo_log
from ._classical import secant_for_extended
from ._secant import solve_pyomo

_DESCRIPTION = "Pyomo models: SCIP MINLP/NLP (scip_direct), HiGHS incremental MILP (appsi_highs), IPOPT if installed"
SOLVERS = ("scip", "highs", "ipopt")
FORMULATIONS = ("minlp", "milp")
DEFAULT_MAX_MILP_VARS = 2_000_000


class PyomoUnsupported(ValueError):
    """The model cannot be written in the requested formulation."""


# ---------------------------------------------------------------------------------- building
def _design(model) -> StratifiedDesign:
    return model.design if isinstance(model, MinCostDesign) else model


# log(c·N) above which c·N is not written as a coefficient: e^34 ≈ 5.8e14 stays well below SCIP's
# infinity (1e20) and keeps every coefficient of the MINLP under 1e15 in magnitude
_LOG_COEF_MAX = 34.0
# log(c·N/hi) above which log1p(n/(c·N)) ≤ e^-40 is below double precision relative to L ≥ 40: dropped
_LOG_Y_NEGLIGIBLE = 40.0


def _log_amplified(d: StratifiedDesign, i: int, v, hi: float | None = None):
    """Pyomo expression of L = log1p(c·N_i/v), the amplified local budget, without huge coefficients.

    * ``log(cN) ≤ 34``: ``log(1 + K/v)`` with K = cN ≤ 5.8e14 (a plain coefficient);
    * else ``L = u + log(1 + exp(−u))`` with ``u = log(cN) − log(v)`` (no coefficient beyond log(cN) ≤ ~750);
      the second term is ≤ e^−40 when ``log(cN/hi) ≥ 40`` and is then dropped (below double precision).
    """
    import pyomo.environ as pe

    lK = float(d.log_c + d.log_N[i])   # log(cN)
    if lK <= _LOG_COEF_MAX:
        return pe.log(1 + math.exp(lK) / v)
    u = lK - pe.log(v)
    hi = float(d.N[i]) if hi is None else float(hi)
    if lK - math.log(max(hi, 1.0)) >= _LOG_Y_NEGLIGIBLE:
        return u
    return u + pe.log(1 + pe.exp(pe.log(v) - lK))


def _term_expr(d: StratifiedDesign, i: int, v, hi: float | None = None, divisor: float = 1.0):
    """Pyomo expression of f_i(v)/divisor (v a Pyomo variable or expression with v ≤ hi).

    Every constant and coefficient stays below ~1e15 in magnitude for ε from 1e-6 to 700 (SCIP's
    infinity is 1e20: a larger coefficient silently turns the model infeasible or wrong); the divisor
    (objective scale) is folded into the weight rather than applied to the sum as a huge constant.
    """
    import pyomo.environ as pe

    a2, s2 = float(d.alpha2[i]) / float(divisor), float(d.sigma2[i])
    mech = d.mechanism
    lK = float(d.log_c + d.log_N[i])   # log(cN)
    delta = float(d.sensitivity)
    if mech.name == "laplace":
        L = _log_amplified(d, i, v, hi)
        return a2 * (s2 + 2 * delta ** 2 / L ** 2) / v
    form = d.linear_noise_form(divisor)
    if form is not None:          # DLap/TuLap with Δ = 1: f/divisor = a/v + b·v + const exactly
        a, b, const = (float(t[i]) for t in form)
        return a / v + const + b * v
    if mech.name == "dlap":
        if lK <= 0 and delta == int(delta) and delta <= 64:
            # small y = cN/v ≤ 1: 1 − p cancels. With r = (1 + y)^{1/Δ} = 1/p and S = Σ_{j<Δ} r^j,
            # r − 1 = y/S exactly, so γ² = 2r/(r − 1)² = 2 r S² v²/(cN)² (no cancellation)
            K = math.exp(lK)
            r = (1 + K / v) ** (1.0 / delta)
            S = sum(r ** j for j in range(1, int(delta))) + 1
            return a2 * s2 / v + (2 * a2 * math.exp(-2 * lK)) * r * S ** 2 * v
        # p = exp(−L/Δ) = (v/(v + cN))^{1/Δ}
        if lK <= _LOG_COEF_MAX:
            p = (v / (v + math.exp(lK))) ** (1.0 / delta)
        else:
            p = pe.exp(-_log_amplified(d, i, v, hi) / delta)
        return a2 * (s2 + 2 * p / (1 - p) ** 2) / v
    raise PyomoUnsupported(f"mechanism {mech.name!r} (sensitivity {delta:g}) has no closed form for the MINLP; "
                           "use formulation='milp' (solver='highs')")


def _ranges(model) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = model.lower.astype(np.int64).copy(), model.upper.astype(np.int64).copy()
    if isinstance(model, StratifiedDesign):
        slo, shi = int(lo.sum()), int(hi.sum())
        lo2 = np.maximum(lo, model.total - (shi - hi))
        hi2 = np.minimum(hi, model.total - (slo - lo))
        return lo2, hi2
    return lo, hi


def _scale_guess(model) -> float:
    d = _design(model)
    lo, hi = _ranges(model)
    x = np.clip((lo + hi) / 2.0, 1, None)
    if isinstance(model, StratifiedDesign):
        x = np.clip(model.N * model.total / model.N.sum(), lo, hi)
    val = float(np.sum(d.terms(x)))
    if not (np.isfinite(val) and val > 0):
        return 1.0
    # (a value near the float range's ends would make 1/scale overflow: the objective is then flat anyway)
    return float(np.clip(val, 1e-250, 1e250))


# the incremental MILP's costs are divided by a scale: at most this ratio between the largest |cost| and 1
_MILP_COST_RANGE = 1e10


def _milp_cost_scale(incs) -> float:
    """Divisor of the MILP costs (only the argmin matters; g is re-evaluated by the model).

    HiGHS's tolerances are absolute on reduced costs, so the typical increment (the median |d|, near the
    optimum's size) becomes ~1 — but never so small that the largest |d| would exceed 1e10 after
    scaling (|cost| ≥ 1e20 is infinite to HiGHS; increments that are pure round-off, ~1e-316 at ε = 700,
    used to give a denormal scale whose reciprocal overflowed).
    """
    allinc = np.abs(np.concatenate(incs)) if incs else np.zeros(0)
    allinc = allinc[np.isfinite(allinc) & (allinc > 0)]
    if not allinc.size:
        return 1.0
    big = float(allinc.max())
    scale = max(float(np.median(allinc)), big / _MILP_COST_RANGE)
    return scale if scale >= np.finfo(float).tiny else 1.0


def build_pyomo_model(model, integer: bool = True, formulation: str = "minlp",
                      max_milp_vars: int = DEFAULT_MAX_MILP_VARS):
    """A Pyomo ``ConcreteModel`` of a StratifiedDesign or MinCostDesign.

    Components: ``m.S`` (strata), ``m.n[i]`` (sample sizes), ``m.total`` (Σ n = η; sum problem),
    ``m.linear`` (the model's linear constraints), ``m.extra`` (empty ``ConstraintList`` for analysts),
    ``m.obj``; MINLP: ``m.g`` (unscaled Σ f_i, an Expression), ``m.objective_scale``; MILP: ``m.delta``,
    ``m.link``; min-cost: ``m.variance`` (the bound g(n) ≤ V0, scaled by V0).
    Raises ``ValueError`` for options it does not know and :class:`PyomoUnsupported` when a mechanism
    has no closed form; an ``ImportError`` if Pyomo is missing.
    """
    import pyomo.environ as pe

    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")
    if not isinstance(model, (StratifiedDesign, MinCostDesign)):
        raise TypeError(f"model must be a StratifiedDesign or MinCostDesign, got {type(model).__name__}")
    d = _design(model)
    k = model.k
    lo, hi = _ranges(model)
    m = pe.ConcreteModel(name=getattr(model, "name", "") or type(model).__name__)
    m.S = pe.RangeSet(0, k - 1)
    dom = pe.Integers if integer else pe.Reals
    m.n = pe.Var(m.S, within=dom, bounds=lambda _, i: (int(lo[i]), int(hi[i])),
                 initialize=lambda _, i: float(np.clip(model.lower[i], lo[i], hi[i])))
    if isinstance(model, StratifiedDesign):
        m.total = pe.Constraint(expr=sum(m.n[i] for i in m.S) == model.total)
    m.linear = pe.ConstraintList()
    for con in model.constraints:
        for row, rhs in zip(con.A, con.b):
            lhs = sum(float(row[i]) * m.n[i] for i in range(k) if row[i] != 0)
            if con.sense == "<=":
                m.linear.add(lhs <= float(rhs))
            elif con.sense == ">=":
                m.linear.add(lhs >= float(rhs))
            else:
                m.linear.add(lhs == float(rhs))
    m.extra = pe.ConstraintList()

    if formulation == "minlp":
        def scaled(divisor):   # Σ f_i / divisor with the divisor folded into the weights
            return sum(_term_expr(d, i, m.n[i], float(hi[i]), divisor) for i in range(k))

        m.g = pe.Expression(expr=scaled(1.0))
        if isinstance(model, StratifiedDesign):
            scale = _scale_guess(model)
            m.objective_scale = pe.Param(initialize=scale, mutable=False)
            m.objective_offset = pe.Param(initialize=0.0, mutable=False)
            m.obj = pe.Objective(expr=scaled(scale), sense=pe.minimize)   # = m.g / scale
        else:
            V0 = model.variance_target
            m.objective_scale = pe.Param(initialize=1.0, mutable=False)
            m.objective_offset = pe.Param(initialize=0.0, mutable=False)
            m.variance = pe.Constraint(expr=scaled(V0) <= model.variance_budget / V0)   # g/V0 ≤ budget/V0
            m.obj = pe.Objective(expr=sum(float(model.cost[i]) * m.n[i] for i in range(k)), sense=pe.minimize)
        return m

    # incremental MILP
    nvars = int(np.sum(hi - lo))
    if nvars > max_milp_vars:
        raise PyomoUnsupported(f"the incremental MILP needs {nvars} δ variables > max_milp_vars={max_milp_vars}")
    incs = []
    ordered = []
    for i in range(k):
        mm = np.arange(lo[i], hi[i], dtype=float)
        inc = np.asarray(d.increments(np.maximum(mm, 1.0), np.full(mm.size, i)), dtype=float) if mm.size \
            else np.zeros(0)
        incs.append(inc)
        dif = np.diff(inc)
        ordered.append(bool(dif.size and np.any(dif < -1e-12 * np.maximum(np.abs(inc[:-1]), np.abs(inc[1:])))))
    idx = [(i, t) for i in range(k) for t in range(int(hi[i] - lo[i]))]
    m.D = pe.Set(initialize=idx, dimen=2, ordered=True)
    # plain sum problem with non-decreasing increments: the LP relaxation is integral (docs/stratified.md), so the
    # δ are continuous and the simplex vertex is checked for integrality by the caller
    lp_exact = integer and isinstance(model, StratifiedDesign) and model.is_plain and not any(ordered)
    m.lp_integral = pe.Param(initialize=bool(lp_exact), within=pe.Any, mutable=False)
    binary = integer and not lp_exact
    if lp_exact:
        # n = lo + Σ δ is integral at the LP's vertex: keeping n integer would make HiGHS run a MIP
        # (branch and bound, presolve of minutes at 10⁵ columns) for what is one LP
        for i in m.S:
            m.n[i].domain = pe.Reals
    m.delta = pe.Var(m.D, within=pe.Binary if binary else pe.UnitInterval, initialize=0)
    by = {i: [] for i in range(k)}
    for (i, t) in idx:
        by[i].append(t)
    m.link = pe.Constraint(m.S, rule=lambda _, i: m.n[i] == int(lo[i]) + sum(m.delta[i, t] for t in by[i]))
    m.order = pe.ConstraintList()
    for i in range(k):
        if ordered[i]:
            for t in by[i][1:]:
                m.order.add(m.delta[i, t] <= m.delta[i, t - 1])
    base = float(np.sum(d.terms(lo.astype(float))))
    inc_expr = sum(float(incs[i][t]) * m.delta[i, t] for (i, t) in idx)
    # (the objective below is Σ (d/scale)·δ, i.e. (g − base)/scale; m.g is the unscaled value)
    if isinstance(model, StratifiedDesign):
        # HiGHS's tolerances are absolute on reduced costs: scale by the typical increment, not by g
        # (increments near the optimum are ~1e-8·g and would drown in a 1e-7 tolerance). The costs are
        # divided here, in floating point, so that no huge coefficient 1/scale is ever formed.
        scale = _milp_cost_scale(incs)
        m.objective_scale = pe.Param(initialize=scale, mutable=False)
        m.objective_offset = pe.Param(initialize=base, mutable=False)
        m.g = pe.Expression(expr=base + inc_expr)
        m.obj = pe.Objective(expr=sum(float(incs[i][t] / scale) * m.delta[i, t] for (i, t) in idx),
                             sense=pe.minimize)
    else:
        V0 = model.variance_target
        m.objective_scale = pe.Param(initialize=1.0, mutable=False)
        m.objective_offset = pe.Param(initialize=0.0, mutable=False)
        m.g = pe.Expression(expr=base + inc_expr)
        m.variance = pe.Constraint(expr=(inc_expr + base) / V0 <= model.variance_budget / V0)
        m.obj = pe.Objective(expr=sum(float(model.cost[i]) * m.n[i] for i in range(k)), sense=pe.minimize)
    return m


# ---------------------------------------------------------------------------------- solving
# columns of the incremental MILP that Pyomo builds and HiGHS loads and solves per second (measured ~10⁴ on a
# 2-core x86_64 machine with presolve off for the integral LP: 2.6·10⁵ columns in ~30 s); a time-limited
# solve whose MILP needs more than this times the limit is refused up front
MILP_COLUMNS_PER_SECOND = 8000
_SOLVER_NAMES = {"scip": "scip_direct", "highs": "appsi_highs", "ipopt": "ipopt"}
_SOLVER_USE = "scip (integer and relaxation), highs (integer, incremental MILP), ipopt (relaxation only)"
# a point of a non-optimal answer (time limit, feasible) is returned only if it satisfies the model's
# constraints to this relative tolerance (sum, linear constraints, g ≤ V0; bounds are clipped)
FEASIBILITY_TOL = 1e-6


def _normalize_solver(solver):
    """The canonical solver name ('SCIP' → 'scip'), or None when the name is not a supported solver."""
    if isinstance(solver, str):
        key = solver.strip().lower()
        if key in SOLVERS:
            return key
    return None


def _unknown_solver_message(solver) -> str:
    return f"solver {solver!r} is not supported by the pyomo backend; supported solvers: {_SOLVER_USE}"


def _is_lp(m) -> bool:
    """The incremental model of the plain sum problem: one LP whose vertex is integral."""
    import pyomo.environ as pe
    return hasattr(m, "lp_integral") and bool(pe.value(m.lp_integral))


def _option_map(solver: str, time_limit, mip_gap, integer: bool = True, lp: bool = False) -> dict:
    opts = {}
    if solver == "scip":
        if time_limit is not None:
            opts["limits/time"] = float(time_limit)
            opts["timing/clocktype"] = 2      # wall clock (the default CPU clock can stall while SCIP waits)
        opts["limits/gap"] = float(mip_gap or 0.0)
        # SCIP 10 symmetry detection treats x^-1 terms with different coefficients as symmetric and
        # returns wrong "optimal" answers on these models (seen on Chen Table 1, TuLap): switch it off
        opts["misc/usesymmetry"] = 0
        # more than 64 KB of SCIP log dead-locks pyomo's scip_direct output capture: keep SCIP quiet
        opts["display/verblevel"] = 0
    elif solver == "highs":
        if time_limit is not None:
            opts["time_limit"] = float(time_limit)
        opts["mip_rel_gap"] = float(mip_gap or 0.0)
        opts["primal_feasibility_tolerance"] = 1e-10
        opts["dual_feasibility_tolerance"] = 1e-10
        if lp:
            # HiGHS's presolve of this LP (one sum row, k link rows, ~k·η columns) ignores the time limit
            # and took 289 s at 2.6e5 columns; the simplex alone needs seconds
            opts["presolve"] = "off"
    elif solver == "ipopt":
        if time_limit is not None:
            opts["max_cpu_time"] = float(time_limit)
        opts["tol"] = 1e-12
    return opts


def solve_pyomo_model(m, solver: str = "scip", time_limit: float | None = None, mip_gap: float | None = None,
                      tee: bool = False, integer: bool = True):
    """Solve a model built by :func:`build_pyomo_model` (or extended from it).

    Returns ``(status, message, lower_bound)`` with the variables loaded when a point exists.
    """
    import pyomo.environ as pe
    from pyomo.opt import TerminationCondition as TC

    key = _normalize_solver(solver)
    if key is None:
        return Status.UNSUPPORTED, _unknown_solver_message(solver), float("nan")
    solver = key
    name = _SOLVER_NAMES[solver]
    opt = pe.SolverFactory(name)
    try:
        available = bool(opt.available(exception_flag=False))
    except Exception:  # noqa: BLE001 - a broken solver plug-in counts as missing
        available = False
    if not available:
        return Status.UNSUPPORTED, (f"Pyomo solver {name!r} is not available (install it to use solver={solver!r}); "
                                    f"supported solvers: {_SOLVER_USE}"), float("nan")
    with quiet_pyomo_log():
        results = opt.solve(m, load_solutions=False, tee=tee,
                            options=_option_map(solver, time_limit, mip_gap, integer, _is_lp(m)))
        tc = results.solver.termination_condition
        has_point = len(results.solution) > 0
        if has_point:
            m.solutions.load_from(results)
        else:
            # no point from the solver: do not leave the starting values behind to be read as an answer
            for var in m.component_data_objects(pe.Var, descend_into=True):
                var.set_value(None, skip_validation=True)
    try:
        lb = float(results.problem.lower_bound)
    except (TypeError, ValueError, AttributeError):
        lb = float("nan")
    if tc in (TC.optimal, TC.globallyOptimal, TC.locallyOptimal):
        status = Status.OPTIMAL if has_point else Status.ERROR
    elif tc in (TC.maxTimeLimit, TC.maxIterations, TC.maxEvaluations):
        status = Status.TIME_LIMIT
    elif tc in (TC.infeasible, TC.infeasibleOrUnbounded):
        status = Status.INFEASIBLE
    elif tc == TC.feasible:
        status = Status.FEASIBLE if has_point else Status.ERROR
    else:
        status = Status.ERROR
    return status, f"{name}: termination {tc}", lb


def known_feasible_point(model):
    """An integer point the model itself certifies feasible (``model.is_feasible``), or None if none is known.

    For the plain sum-and-bounds problem one always exists after validation (Σlo ≤ η ≤ Σhi): the
    largest-remainder proportional design. With linear constraints or a variance bound, a few simple
    candidates are tried and only a point that passes ``is_feasible`` is returned.
    """
    from ..models.stratified import largest_remainder

    lo, hi = np.asarray(model.lower, dtype=np.int64), np.asarray(model.upper, dtype=np.int64)
    cands = []
    if isinstance(model, StratifiedDesign):
        for w in (model.N.astype(float), np.ones(model.k)):
            try:
                cands.append(largest_remainder(w, model.total, lo, hi))
            except ValueError:
                pass
    else:
        cands += [hi, lo]
    for n in cands:
        try:
            if model.is_feasible(n):
                return np.asarray(n, dtype=np.int64)
        except (ValueError, FloatingPointError):
            continue
    return None


def _check_opts(time_limit, mip_gap, formulation):
    V.time_limit(time_limit)
    if mip_gap is not None and (not isinstance(mip_gap, (int, float)) or not 0 <= mip_gap < 1):
        raise ValueError(f"mip_gap must be in [0, 1), got {mip_gap!r}")
    if formulation is not None and formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")


def _run(model, integer: bool, solver: str, time_limit, mip_gap, formulation, tee, max_milp_vars) -> Solution:
    t0 = time.perf_counter()
    key = _normalize_solver(solver)
    if key is None:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=str(solver), message=_unknown_solver_message(solver))
    solver = key
    _check_opts(time_limit, mip_gap, formulation)
    formulation = formulation or ("milp" if solver == "highs" else "minlp")
    if solver == "highs" and formulation == "minlp":
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver="highs",
                        message="HiGHS solves linear models only: use formulation='milp' (the incremental MILP)")
    if solver == "ipopt" and integer:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver="ipopt",
                        message="IPOPT is a continuous NLP solver; use solver='scip' or 'highs' for integer designs")
    if not integer and formulation == "milp":
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver,
                        message="the LP relaxation of the incremental MILP is not the continuous relaxation of the "
                                "model; use formulation='minlp' (solver='scip' or 'ipopt')")
    try:
        import pyomo.environ  # noqa: F401
    except ImportError as exc:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver, message=f"Pyomo is not installed: {exc}")
    if formulation == "milp" and time_limit is not None:
        lo, hi = _ranges(model)
        columns = int(np.sum(hi - lo))
        if columns > MILP_COLUMNS_PER_SECOND * time_limit:
            # building the MILP and handing it to HiGHS through Pyomo runs before HiGHS's clock starts and
            # cannot be interrupted: refuse at once rather than overrun the limit by minutes
            return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                            details={"formulation": formulation, "milp_columns": columns},
                            message=f"the incremental MILP has {columns} columns; building and loading it through "
                                    f"Pyomo takes about {columns / MILP_COLUMNS_PER_SECOND:.3g} s, beyond the time "
                                    f"limit {time_limit:g} s (raise time_limit or use solver='scip' or exact)")
    try:
        m = build_pyomo_model(model, integer=integer, formulation=formulation, max_milp_vars=max_milp_vars)
    except PyomoUnsupported as exc:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver, message=str(exc))
    build_time = time.perf_counter() - t0
    if time_limit is not None:
        # the limit covers the whole call: building counts, the solver gets what is left. (Pyomo's
        # hand-over of a large model to the solver happens before the solver's clock starts and cannot be
        # interrupted; its time is reported in details["load_and_solve_time"].)
        if build_time >= time_limit:
            return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=build_time,
                            details={"formulation": formulation, "build_time": build_time},
                            message=f"building the {formulation.upper()} took {build_time:.3g} s, beyond the "
                                    f"time limit {time_limit:g} s (lower max_milp_vars to refuse such models early)")
        time_limit = time_limit - build_time
        if formulation == "milp":
            # the hand-over to HiGHS runs before HiGHS's clock starts: leave it its estimated share
            time_limit = max(time_limit - columns / MILP_COLUMNS_PER_SECOND, 0.05 * time_limit)
    try:
        status, msg, lb = solve_pyomo_model(m, solver, time_limit, mip_gap, tee, integer)
    except Exception as exc:  # solver faults become a status
        return Solution(Status.ERROR, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                        message=f"{type(exc).__name__}: {exc}")
    return _to_solution(model, m, integer, solver, formulation, status, msg, lb, mip_gap, t0, build_time)


def _to_solution(model, m, integer, solver, formulation, status, msg, lb, mip_gap, t0, build_time) -> Solution:
    import pyomo.environ as pe

    vals = [m.n[i].value for i in range(model.k)]
    details = {"formulation": formulation, "build_time": build_time,
               "load_and_solve_time": time.perf_counter() - t0 - build_time}
    if status == Status.INFEASIBLE:
        known = known_feasible_point(model)
        if known is not None:
            # the model object itself exhibits a feasible point: the solver's claim is a numerical failure
            status = Status.ERROR
            msg = (f"{msg}; the solver's infeasibility claim contradicts a known feasible point "
                   f"n={known.tolist()} (numerical trouble in the solver, not an infeasible model)")
    if any(v is None for v in vals) or status in (Status.INFEASIBLE, Status.ERROR, Status.UNSUPPORTED):
        if status == Status.TIME_LIMIT:
            msg = f"{msg}; no incumbent (no feasible point found within the time limit)"
        return Solution(status, backend="pyomo", solver=solver, message=msg, details=details,
                        wall_time=time.perf_counter() - t0)
    pt = np.array(vals, dtype=float)
    scale = float(pe.value(m.objective_scale))
    offset = float(pe.value(m.objective_offset)) if hasattr(m, "objective_offset") else 0.0
    if integer:
        n = np.round(pt).astype(np.int64)
        if formulation == "milp" and hasattr(m, "lp_integral") and pe.value(m.lp_integral) \
                and np.any(np.abs(pt - n) > 1e-6):
            return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                            wall_time=time.perf_counter() - t0,
                            message=f"{msg}; the incremental LP returned a fractional point (ties); "
                                    "rerun with a model that has an extra constraint to force binaries")
        if not model.is_feasible(n, tol=1e-7):
            if status == Status.TIME_LIMIT:
                return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, details=details,
                                wall_time=time.perf_counter() - t0, message=f"{msg}; no incumbent")
            return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                            wall_time=time.perf_counter() - t0,
                            message=f"{msg}; the solver's rounded point {n.tolist()} is infeasible")
        if status == Status.OPTIMAL and mip_gap:
            status = Status.FEASIBLE
        sol = model.make_solution(n=n, status=status, message=msg)
        if isinstance(model, StratifiedDesign) and model.is_plain:
            model.attach_certificate(sol)
        else:
            lbu = lb * scale + offset if np.isfinite(lb) else float("nan")
            gap = (sol.objective - lbu) / abs(sol.objective) if np.isfinite(lbu) and sol.objective else float("nan")
            sol.certificate = Certificate("gap", status == Status.OPTIMAL, lower_bound=lbu, gap=gap,
                                          message=f"{solver} bound")
    else:
        pt = np.clip(pt, model.lower, model.upper)
        if status == Status.OPTIMAL and not model.is_feasible(pt, tol=1e-8):
            # SCIP's feasibility tolerance (1e-6) can leave g(x) ≤ V0 violated by ~1e-6 relative, with a
            # cost below the true optimum: not a proven optimum of the stated model
            status, msg = Status.FEASIBLE, f"{msg}; the point violates a constraint beyond 1e-8 (solver tolerance)"
        if status != Status.OPTIMAL and not model.is_feasible(pt, tol=FEASIBILITY_TOL):
            # a non-optimal answer carries a point only when it satisfies the model (e.g. a time-limited
            # solve that stopped before finding any feasible point)
            why = f"the solver's point {np.array2string(pt, precision=6, threshold=8)} violates the model's " \
                  f"constraints beyond relative tolerance {FEASIBILITY_TOL:g}"
            if status == Status.TIME_LIMIT:
                return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, details=details,
                                wall_time=time.perf_counter() - t0, message=f"{msg}; no feasible point ({why})")
            return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                            wall_time=time.perf_counter() - t0, message=f"{msg}; {why}")
        sol = model.make_solution(x=pt, status=status, message=msg)
    sol.solver = solver
    sol.details.update(details)
    if np.isfinite(lb):
        sol.details["solver_lower_bound"] = lb * scale + offset
    sol.wall_time = time.perf_counter() - t0
    return sol


def solve(model, solver: str = "scip", time_limit: float | None = None, mip_gap: float | None = None,
          formulation: str | None = None, tee: bool = False, max_milp_vars: int = DEFAULT_MAX_MILP_VARS) -> Solution:
    """Integer design with SCIP (MINLP) or HiGHS (incremental MILP)."""
    return _run(model, True, solver, time_limit, mip_gap, formulation, tee, max_milp_vars)


def relax(model, solver: str = "scip", time_limit: float | None = None, mip_gap: float | None = None,
          formulation: str | None = None, tee: bool = False, max_milp_vars: int = DEFAULT_MAX_MILP_VARS) -> Solution:
    """Continuous relaxation with SCIP (global NLP) or IPOPT (if installed)."""
    return _run(model, False, solver, time_limit, mip_gap, formulation, tee, max_milp_vars)


for _cls in (StratifiedDesign, MinCostDesign):
    register("pyomo", _cls, "solve", _DESCRIPTION)(secant_for_extended(solve, solve_pyomo))
    register("pyomo", _cls, "relax", _DESCRIPTION)(secant_for_extended(relax, None))
