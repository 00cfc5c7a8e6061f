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

Solve options: the common ones of :mod:`dpopt.backends.pyomo._solver` (``solver`` "scip" | "highs" | "ipopt",
``time_limit`` (None: 300 s), ``rel_gap`` (default 0 = proven optimum), ``verbose``, ``solver_options``), plus
``formulation`` (default: "minlp" for SCIP/IPOPT, "milp" for HiGHS) and ``max_milp_vars``. Solver statuses
map onto ``Solution.status`` through the shared map; an unknown or missing solver gives ``unsupported``.
A non-optimal answer (time limit, feasible) carries a point only when the point satisfies the model to
``FEASIBILITY_TOL`` (relative); an ``infeasible`` claim from the solver on a model with a known feasible point
(e.g. the plain sum-and-bounds problem) is reported as ``error``. A rounded integer point that violates a
constraint within the solver's tolerance is repaired by unit moves to a feasible point (status ``feasible``)
or, failing that, reported ``feasible`` with the violation in the message and ``details["max_violation"]``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ... import _validate as V
from ...models.min_cost import MinCostDesign
from ...models.stratified import StratifiedDesign
from ...registry import register
from ...result import Certificate, Solution, Status
from . import _solver as PY
from .._routes import secant_for_extended
from .._secant import solve_pyomo

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


def _log_amplified(d: StratifiedDesign, i: int, v, hi: float | None = None, ref: float = 1.0):
    """Pyomo expression of L/ref, L = log1p(c·N_i/v) the amplified local budget, without huge coefficients.

    * ``log(cN) ≤ 34``: ``log(1 + K/v)`` with K = cN ≤ 5.8e14 (a plain coefficient);
    * else ``L = u + log(1 + exp(−u))`` with ``u = log(cN) − log(v)`` (no coefficient beyond log(cN) ≤ ~750);
      the second term is ≤ e^−40 when ``log(cN/hi) ≥ 40`` and is then dropped (below double precision).
    """
    import pyomo.environ as pe

    lK = float(d.log_c + d.log_N[i])   # log(cN)
    if lK <= _LOG_COEF_MAX:
        return pe.log(1 + math.exp(lK) / v) / ref if ref != 1.0 else pe.log(1 + math.exp(lK) / v)
    u = lK / ref - pe.log(v) / ref
    hi = float(d.N[i]) if hi is None else float(hi)
    if lK - math.log(max(hi, 1.0)) >= _LOG_Y_NEGLIGIBLE:
        return u
    return u + pe.log(1 + pe.exp(pe.log(v) - lK)) / ref


def _amplified_floor(d: StratifiedDesign, i: int, hi: float | None) -> float:
    """L = log1p(c·N_i/hi), the smallest amplified budget on the stratum's range (a float, log space)."""
    hi = float(d.N[i]) if hi is None else float(hi)
    return float(np.logaddexp(0.0, float(d.log_c + d.log_N[i]) - math.log(max(hi, 1.0))))


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
        # 2Δ²/L² = (2Δ²/Lr²)/(L/Lr)² with Lr the smallest L on the range (when ≥ 1): for large cN, L varies
        # by less than SCIP's epsilon (1e-9) in absolute terms and its spatial branch and bound never
        # closed the gap (ε = 700, N = 1e9: no progress in 150 s); L/Lr = O(1) varies visibly
        Lr = max(_amplified_floor(d, i, hi), 1.0)
        L = _log_amplified(d, i, v, hi, Lr)
        return a2 * (s2 + (2 * delta ** 2 / Lr ** 2) / L ** 2) / v
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
    ``m.obj``; MINLP: ``m.g`` (unscaled Σ f_i, an Expression), ``m.objective_scale`` and ``m.objective_offset``
    (the model's objective is ``scale·obj + offset``: the offset holds the fpc constant); MILP: ``m.delta``,
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
            # the model's objective is Σ f_i minus the fpc constant: objective = scale·obj + offset
            m.objective_offset = pe.Param(initialize=-d._fpc_const, mutable=False)
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
        m.objective_offset = pe.Param(initialize=base - d._fpc_const, mutable=False)   # fpc: see the MINLP
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
# a point of a non-optimal answer (time limit, feasible) is returned only if it satisfies the model's
# constraints to this relative tolerance (sum, linear constraints, g ≤ V0; bounds are clipped)
FEASIBILITY_TOL = 1e-6
# a repaired integer point stays ``optimal`` only when its objective is within this relative gap of the solver's
# lower bound (a valid bound for the exact model: the solver's feasible set contains the model's)
PROVEN_GAP = 1e-9
# the repair of a rounded integer point gives up after this many unit moves (plus 2 per stratum)
REPAIR_MOVES = 20


def max_violation(model, n) -> float:
    """Largest relative violation of the model's constraints at n, measured as ``model.is_feasible`` measures
    it (sum, linear rows relative to 1 + |b|, the min-cost variance bound); inf outside the bounds, 0 if none."""
    n = np.asarray(n, dtype=float)
    if np.any(n < model.lower) or np.any(n > model.upper):
        return math.inf
    v = 0.0
    if isinstance(model, StratifiedDesign):
        v = abs(float(n.sum()) - model.total) / max(1, model.total)
    for con in model.constraints:
        v = max(v, float(np.max(con.residual(n) / (1 + np.abs(con.b)))))
    if isinstance(model, MinCostDesign) and model.variance_target is not None:
        v = max(v, (model.variance_value(n) - model.variance_target) / model.variance_target)
    design = model.design if isinstance(model, MinCostDesign) else model
    for t in getattr(model, "precision_targets", []):
        v = max(v, (design.precision_value(t, n) - t.bound) / t.bound)
    return max(v, 0.0)


def repair_integer_point(model, n):
    """A feasible integer point a few unit moves from ``n`` (a rounded solver point that violates a constraint
    by the solver's tolerance), or None.

    Greedy and bounded: each step takes the move that most reduces :func:`max_violation` (ties: the smaller
    objective) among the exchanges of one unit between two strata (designs with a fixed total) or the ±1 moves
    of one stratum (min-cost designs), and stops when the point is feasible, when no move reduces the violation,
    or after ``REPAIR_MOVES + 2k`` moves."""
    n = np.asarray(n, dtype=np.int64).copy()
    k = model.k
    lo, hi = np.asarray(model.lower, dtype=np.int64), np.asarray(model.upper, dtype=np.int64)
    for _ in range(REPAIR_MOVES + 2 * k):
        if model.is_feasible(n):
            return n
        current = max_violation(model, n)
        if isinstance(model, StratifiedDesign):
            moves = [(i, j) for i in range(k) if n[i] > lo[i] for j in range(k) if j != i and n[j] < hi[j]]
        else:
            moves = [(i, -1) for i in range(k) if n[i] > lo[i]] + [(-1, j) for j in range(k) if n[j] < hi[j]]
        best = None
        for i, j in moves:
            cand = n.copy()
            if i >= 0:
                cand[i] -= 1
            if j >= 0:
                cand[j] += 1
            key = (max_violation(model, cand), model.objective_value(cand))
            if best is None or key < best[0]:
                best = (key, cand)
        if best is None or not best[0][0] < current:
            return None
        n = best[1]
    return n if model.is_feasible(n) else None


def _unknown_solver_message(solver) -> str:
    return PY.unknown_solver_message(solver, SOLVERS, "stratified designs")


def _is_lp(m) -> bool:
    """The incremental model of the plain sum problem: one LP whose vertex is integral."""
    import pyomo.environ as pe
    return hasattr(m, "lp_integral") and bool(pe.value(m.lp_integral))


def _option_map(solver: str, lp: bool = False) -> dict:
    """dpopt's settings for each solver (time limit and gap come from :func:`_pyomo.limit_options`)."""
    opts = {}
    if solver == "scip":
        opts["limits/gap"] = 0.0
        # SCIP 10 symmetry detection treats x^-1 terms with different coefficients as symmetric and
        # returns wrong "optimal" answers on these models (seen on Chen Table 1, TuLap): switch it off
        opts["misc/usesymmetry"] = 0
    elif solver == "highs":
        opts["mip_rel_gap"] = 0.0
        opts["primal_feasibility_tolerance"] = 1e-10
        opts["dual_feasibility_tolerance"] = 1e-10
        if lp:
            # HiGHS's presolve of this LP (one sum row, k link rows, ~k·η columns) ignores the time limit
            # and took 289 s at 2.6e5 columns; the simplex alone needs seconds
            opts["presolve"] = "off"
    elif solver == "ipopt":
        opts["tol"] = 1e-12
    return opts


def solve_pyomo_model(m, solver: str = "scip", time_limit: float | None = None, rel_gap: float | None = None,
                      verbose: bool = False, solver_options: dict | None = None):
    """Solve a model built by :func:`build_pyomo_model` (or extended from it).

    ``solver`` is one of dpopt's names ("scip", "highs", "ipopt"); ``time_limit`` None means the default of
    :data:`dpopt.backends.pyomo._solver.DEFAULT_TIME_LIMIT` seconds. Returns ``(status, message, lower_bound)`` with
    the variables loaded when a point exists. A KeyboardInterrupt (also one the solver caught) propagates.
    """
    key = PY.solver_key(solver, SOLVERS)
    if key is None:
        return Status.UNSUPPORTED, _unknown_solver_message(solver), float("nan")
    opts = PY.check_options(time_limit, rel_gap, verbose, solver_options, {})
    PY.check_solver_options(key, opts.solver_options)
    opt, why = PY.open_solver(key)
    if opt is None:
        return Status.UNSUPPORTED, f"{why}; allowed: {PY.allowed_text(SOLVERS)}", float("nan")
    settings = {**_option_map(key, _is_lp(m)), **PY.limit_options(key, opts), **opts.solver_options}
    status, tc, results, _ = PY.run(opt, key, m, settings, opts.verbose)
    return status, f"{PY.SOLVERS[key]}: termination {tc}", PY.lower_bound(results)


def known_feasible_point(model):
    """An integer point the model itself certifies feasible (``model.is_feasible``), or None if none is known.

    For the plain sum-and-bounds problem one always exists after validation (Σlo ≤ η ≤ Σhi): the
    largest-remainder proportional design. With linear constraints or a variance bound, a few simple
    candidates are tried and only a point that passes ``is_feasible`` is returned.
    """
    from ...models.stratified import largest_remainder

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


def _check_opts(time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars, removed):
    opts = PY.check_options(time_limit, rel_gap, verbose, solver_options, removed,
                            where="the pyomo backend for stratified designs")
    if formulation is not None and formulation not in FORMULATIONS:
        raise V.InvalidOption(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")
    V.option(V.integer, "max_milp_vars", max_milp_vars, minimum=1)
    return opts


def _run(model, integer: bool, solver, time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars,
         removed) -> Solution:
    t0 = time.perf_counter()
    opts = _check_opts(time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars, removed)
    key = PY.solver_key(solver, SOLVERS)
    if key is None:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=str(solver)[:80],
                        message=_unknown_solver_message(solver))
    solver = key
    PY.check_solver_options(solver, opts.solver_options)
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
    time_limit = opts.time_limit
    if formulation == "milp":
        lo, hi = _ranges(model)
        columns = int(np.sum(hi - lo))
        if columns > MILP_COLUMNS_PER_SECOND * time_limit:
            # building the MILP and handing it to HiGHS through Pyomo runs before HiGHS's clock starts and
            # cannot be interrupted: refuse at once rather than overrun the limit by minutes
            return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                            details={"formulation": formulation, "milp_columns": columns, **opts.details()},
                            message=f"the incremental MILP has {columns} columns; building and loading it through "
                                    f"Pyomo takes about {columns / MILP_COLUMNS_PER_SECOND:.3g} s, beyond the "
                                    f"{opts.note()} (raise time_limit or use solver='scip' or exact)")
    try:
        m = build_pyomo_model(model, integer=integer, formulation=formulation, max_milp_vars=max_milp_vars)
    except PyomoUnsupported as exc:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver, message=str(exc))
    build_time = time.perf_counter() - t0
    # the limit covers the whole call: building counts, the solver gets what is left. (Pyomo's hand-over of
    # a large model to the solver happens before the solver's clock starts and cannot be interrupted; its
    # time is reported in details["load_and_solve_time"].)
    if build_time >= time_limit:
        return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=build_time,
                        details={"formulation": formulation, "build_time": build_time, **opts.details()},
                        message=f"building the {formulation.upper()} took {build_time:.3g} s, beyond the "
                                f"{opts.note()} (lower max_milp_vars to refuse such models early)")
    time_limit = time_limit - build_time
    if formulation == "milp":
        # the hand-over to HiGHS runs before HiGHS's clock starts: leave it its estimated share
        time_limit = max(time_limit - columns / MILP_COLUMNS_PER_SECOND, 0.05 * time_limit)
    try:
        status, msg, lb = solve_pyomo_model(m, solver, time_limit, opts.rel_gap, opts.verbose, opts.solver_options)
    except (KeyboardInterrupt, V.InvalidOption):
        raise
    except Exception as exc:  # solver faults become a status
        return Solution(Status.ERROR, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                        message=f"{type(exc).__name__}: {exc}", details=opts.details())
    if status == Status.TIME_LIMIT:
        msg = f"{msg} ({opts.note()})"
    return _to_solution(model, m, integer, solver, formulation, status, msg, lb, opts, t0, build_time)


def _to_solution(model, m, integer, solver, formulation, status, msg, lb, opts, t0, build_time) -> Solution:
    import pyomo.environ as pe

    vals = [m.n[i].value for i in range(model.k)]
    details = {"formulation": formulation, "build_time": build_time,
               "load_and_solve_time": time.perf_counter() - t0 - build_time, **opts.details()}
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
        repaired = violation = None
        if not model.is_feasible(n):
            # the solver accepts points that violate a constraint by its own tolerance (~1e-6 relative):
            # move units to a feasible point nearby, else report the violation
            violation = max_violation(model, n)
            fixed = repair_integer_point(model, n) if violation <= FEASIBILITY_TOL else None
            if fixed is not None:
                repaired, n = n, fixed
                msg = (f"{msg}; the solver's rounded point {repaired.tolist()} violated a constraint by "
                       f"{violation:.2g} (relative, within the solver's tolerance) and was repaired to a feasible "
                       f"point by unit moves")
                details["repaired_from"] = repaired.tolist()
            elif violation <= FEASIBILITY_TOL and status != Status.INFEASIBLE:
                status = Status.FEASIBLE if status == Status.OPTIMAL else status
                msg = (f"{msg}; the point violates a constraint by {violation:.2g} (relative, within the solver's "
                       f"tolerance {FEASIBILITY_TOL:g}) and no feasible point was found by unit moves")
                details["max_violation"] = violation
            elif status == Status.TIME_LIMIT:
                return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, details=details,
                                wall_time=time.perf_counter() - t0, message=f"{msg}; no incumbent")
            else:
                return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                                wall_time=time.perf_counter() - t0,
                                message=f"{msg}; the solver's rounded point {n.tolist()} is infeasible "
                                        f"(relative violation {violation:.2g})")
        if status == Status.OPTIMAL and opts.rel_gap:
            status = Status.FEASIBLE
        sol = model.make_solution(n=n, status=status, message=msg)
        if isinstance(model, StratifiedDesign) and model.is_plain:
            model.attach_certificate(sol)
        else:
            lbu = lb * scale + offset if np.isfinite(lb) else float("nan")
            gap = (sol.objective - lbu) / abs(sol.objective) if np.isfinite(lbu) and sol.objective else float("nan")
            if repaired is not None and status == Status.OPTIMAL and not gap <= PROVEN_GAP:
                # the solver proved its own (slightly infeasible) point; the repaired one is proven only by the bound
                sol.status = status = Status.FEASIBLE
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


def solve(model, solver: str = "scip", time_limit: float | None = None, rel_gap: float | None = None,
          verbose: bool = False, solver_options: dict | None = None, formulation: str | None = None,
          max_milp_vars: int = DEFAULT_MAX_MILP_VARS, **removed) -> Solution:
    """Integer design with SCIP (MINLP) or HiGHS (incremental MILP)."""
    return _run(model, True, solver, time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars,
                removed)


def relax(model, solver: str = "scip", time_limit: float | None = None, rel_gap: float | None = None,
          verbose: bool = False, solver_options: dict | None = None, formulation: str | None = None,
          max_milp_vars: int = DEFAULT_MAX_MILP_VARS, **removed) -> Solution:
    """Continuous relaxation with SCIP (global NLP) or IPOPT (if installed)."""
    return _run(model, False, solver, time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars,
                removed)


solve.solvers = relax.solvers = SOLVERS    # read by compare and the CLI (row variants, --solver checks)


for _cls in (StratifiedDesign, MinCostDesign):
    register("pyomo", _cls, "solve", _DESCRIPTION)(secant_for_extended(solve, solve_pyomo))
    register("pyomo", _cls, "relax", _DESCRIPTION)(secant_for_extended(relax, None))
