"""Pyomo translation of a stratified or min-cost design: closed-form terms with their scaling, and the
MINLP and incremental-MILP model builders (the formulations are described in :mod:`.stratified`)."""

from __future__ import annotations

import math

import numpy as np

from ...models.stratified import MinCostDesign, StratifiedDesign


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


def nominal_budget_expr(log_cN: float, v, hi: float, ref: float = 1.0):
    """Pyomo expression of L/ref, L = log1p(c·N/v) the nominal budget of a sample of v out of N (log_cN =
    log(c·N), c = expm1(ε)), without huge coefficients. The one Pyomo home of the amplified budget (the
    stratified MINLP and the sample-size program).

    * ``log(cN) ≤ 34``: ``log(1 + K/v)`` with K = cN ≤ 5.8e14 (a plain coefficient);
    * else ``L = u + log(1 + exp(−u))`` with ``u = log(cN) − log(v)`` (no coefficient beyond log(cN) ≤ ~750);
      the second term is ≤ e^−40 when ``log(cN/hi) ≥ 40`` (hi the largest v) and is then dropped (below
      double precision).
    """
    import pyomo.environ as pe

    lK = float(log_cN)
    if lK <= _LOG_COEF_MAX:
        return pe.log(1 + math.exp(lK) / v) / ref if ref != 1.0 else pe.log(1 + math.exp(lK) / v)
    u = lK / ref - pe.log(v) / ref
    if lK - math.log(max(float(hi), 1.0)) >= _LOG_Y_NEGLIGIBLE:
        return u
    return u + pe.log(1 + pe.exp(pe.log(v) - lK)) / ref


def _term_expr(d: StratifiedDesign, i: int, v, hi: float | None = None, divisor: float = 1.0):
    """Pyomo expression of f_i(v)/divisor (v a Pyomo variable or expression with v ≤ hi).

    Every constant and coefficient stays below ~1e15 in magnitude for ε from 1e-6 to 700 (SCIP's
    infinity is 1e20: a larger coefficient silently turns the model infeasible or wrong); the divisor
    (objective scale) is folded into the weight rather than applied to the sum as a huge constant. The
    noise variance is the mechanism's ``pyomo_variance`` hook; a mechanism without one is refused.
    """
    import pyomo.environ as pe

    form = d.linear_noise_form(divisor)
    if form is not None:          # DLap/TuLap with Δ = 1: f/divisor = a/v + b·v + const exactly
        a, b, const = (float(t[i]) for t in form)
        return a / v + const + b * v
    mech, delta = d.noise_mechanism(0), d.sensitivity_of(0)
    why = mech.support("pyomo_variance")
    if not why:
        raise PyomoUnsupported(f"{why}; so the MINLP cannot be written: use formulation='milp' "
                               "(solver='highs'), or give the mechanism the hook")
    hook = mech.pyomo_variance
    a2, s2 = float(d.alpha2[i]) / float(divisor), float(d.sigma2[i])
    lK = float(d.log_c + d.log_N[i])   # log(cN)
    hi = float(d.N[i]) if hi is None else float(hi)
    # the budget is written as Lr·(L/Lr), Lr the smallest L on the range (when ≥ 1): for large cN, L varies by
    # less than SCIP's epsilon (1e-9) in absolute terms and its spatial branch and bound never closed the gap
    # (Laplace, ε = 700, N = 1e9: no progress in 150 s); L/Lr = O(1) varies visibly
    Lr = max(float(np.logaddexp(0.0, lK - math.log(max(hi, 1.0)))), 1.0)
    growth = math.exp(lK) / v if lK <= _LOG_COEF_MAX else None   # expm1(L) = cN/v, for v ≥ 1 at most cN
    noise = hook(pe, nominal_budget_expr(lK, v, hi, Lr), delta, eps_scale=Lr, growth=growth,
                 growth_max=math.exp(lK) if growth is not None else math.inf)
    return a2 * (s2 + noise) / v


def _unit_expr(d: StratifiedDesign, i: int, j: int, v, hi: float):
    """Pyomo expression of the unit term t_ij(v) = (σ_ij² + γ_j²(v))/v of variable j in stratum i (no weight),
    the variable's budget share included: the mechanism's ``pyomo_variance`` hook at the budget s_j·L(v)
    (DLap/TuLap at Δ = 1 and the whole budget: the exact form a/v + b·v + const)."""
    import pyomo.environ as pe

    s2 = float(d.sigma2_matrix[i, j])
    form = d._unit_linear_form(j, np.array([i]))
    lK = float(d.log_c + d.log_N[i])
    if form is not None:          # t = a/v + const + b·v exactly (const = 2/(cN) for DLap/TuLap)
        a, b, const = (float(t[0]) for t in form)
        return a / v + const + b * v
    mech, delta = d.noise_mechanism(j), d.sensitivity_of(j)
    why = mech.support("pyomo_variance")
    if not why:
        raise PyomoUnsupported(f"{why}; so the MINLP cannot be written: give the mechanism the hook")
    hook = mech.pyomo_variance
    share = float(d.shares[j])
    Lr = max(float(np.logaddexp(0.0, lK - math.log(max(hi, 1.0)))), 1.0)
    whole = share == 1.0 and lK <= _LOG_COEF_MAX
    growth = math.exp(lK) / v if whole else None        # expm1(L) = cN/v only at the whole budget
    noise = hook(pe, nominal_budget_expr(lK, v, hi, Lr), delta, eps_scale=share * Lr, growth=growth,
                 growth_max=math.exp(lK) if whole else math.inf)
    return (s2 + noise) / v


def _row_expr(d: StratifiedDesign, W: np.ndarray, n, hi, divisor: float = 1.0, clock=None):
    """Σ_ij (W_ij/divisor)·t_ij(n_i): a row of the separable program (:mod:`dpopt.formulations.separable`);
    ``clock`` (a :class:`._solver.BuildClock`, optional) is ticked once per term."""
    terms = []
    for i, j in zip(*np.nonzero(W)):
        terms.append((float(W[i, j]) / divisor) * _unit_expr(d, int(i), int(j), n[int(i)], float(hi[i])))
        if clock is not None:
            clock.tick(clock.done + 1)
    return sum(terms) if terms else 0


def term_expression(model, i: int, var, variable=0, upper: float | None = None):
    """Pyomo expression of the unit term t_ij(var) = (σ_ij² + γ_j²(var))/var of stratum ``i`` and study
    variable ``variable`` (a name or 0-based index): the variance of stratum i's privatised mean of that
    variable at sample size ``var`` (a Pyomo variable or expression, e.g. ``m.n[i]``), the variable's budget
    share and the mechanism's noise included, with no weight. Every row of the compiled program is
    Σ W_ij·t_ij(n_i) (+ a linear part; :mod:`dpopt.formulations.separable`), so a user's own row is a weighted
    sum of these, never a re-derived formula. ``upper``: the largest value ``var`` takes (default the model's
    bound), used to keep coefficients small. Raises :class:`PyomoUnsupported` for a mechanism without a
    ``pyomo_variance`` hook."""
    d = _design(model)
    j = d.variable_index(variable)
    i = int(i)
    if not 0 <= i < d.k:
        raise ValueError(f"stratum index must be in [0, {d.k - 1}], got {i}")
    return _unit_expr(d, i, j, var, float(d.upper[i] if upper is None else upper))


def row_expression(model, W, n, divisor: float = 1.0):
    """Pyomo expression of Σ_ij (W_ij/divisor)·t_ij(n_i) (W a k×J weight matrix, or a length-k vector for the
    only variable; ``n`` the sample-size variables, e.g. ``m.n``): a row of the compiled program, e.g. a
    domain's variance with W_i = (N_i/N_D)² on its strata."""
    d = _design(model)
    W = np.asarray(W, dtype=float)
    if W.ndim == 1:
        W = W[:, None] if d.J == 1 else None
        if W is None:
            raise ValueError(f"the model has {d.J} variables: give W as a k×J matrix")
    if W.shape != (d.k, d.J):
        raise ValueError(f"W must be {d.k}×{d.J}, got {W.shape}")
    return _row_expr(d, W, n, d.upper.astype(float), divisor)


def _ranges(model) -> tuple[np.ndarray, np.ndarray]:
    """Sum-tightened ranges: :func:`dpopt.formulations.ranges` (the one home)."""
    from ...formulations.separable import ranges
    return ranges(model)


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
                      max_milp_vars: int = DEFAULT_MAX_MILP_VARS, clock=None):
    """A Pyomo ``ConcreteModel`` of a StratifiedDesign or MinCostDesign.

    Attribute ``m.dpopt_model``: the model translated. Components: ``m.S`` (strata), ``m.n[i]`` (sample sizes), ``m.total`` (Σ n = η; sum problem),
    ``m.linear`` (the model's linear constraints), ``m.precision`` (its precision targets, each divided by
    its right-hand side: Σ W_ij t_ij(n_i)/rhs ≤ 1, fpc included), ``m.extra`` (empty ``ConstraintList`` for
    analysts), ``m.obj``; MINLP: ``m.g`` (unscaled Σ f_i, an Expression), ``m.objective_scale`` and
    ``m.objective_offset`` (the model's objective is ``scale·obj + offset``: the offset holds the fpc
    constant); MILP: ``m.delta``, ``m.link``; min-cost: ``m.variance`` (the bound g(n) ≤ V0, scaled by V0).
    Every row of the model is written, or the model is refused: raises ``ValueError`` for options it does not
    know and :class:`PyomoUnsupported` when a mechanism has no closed form or the formulation cannot hold a
    row (the incremental MILP and precision targets); an ``ImportError`` if Pyomo is missing. ``clock`` (a
    :class:`._solver.BuildClock` over ``k·(1 + targets)`` units, optional) is ticked per term of the MINLP and
    raises :class:`._solver.OutOfTime` once the build would end past its deadline.
    """
    import pyomo.environ as pe

    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")
    if not isinstance(model, (StratifiedDesign, MinCostDesign)):
        raise TypeError(f"model must be a StratifiedDesign or MinCostDesign, got {type(model).__name__}")
    d = _design(model)
    k = model.k
    targets = list(model.precision_targets)
    if targets and formulation == "milp":
        raise PyomoUnsupported(f"the incremental MILP does not write precision targets ({len(targets)} in this "
                               "model: " + ", ".join(repr(t.name) for t in targets) + "); use formulation='minlp' "
                               "(SCIP), or solve the model with backend 'pyomo' (the secant MILP) or 'exact'")
    lo, hi = _ranges(model)
    m = pe.ConcreteModel(name=getattr(model, "name", "") or type(model).__name__)
    m.dpopt_model = model           # the dpopt model it translates (read by solve_pyomo_model)
    m.S = pe.RangeSet(0, k - 1)
    dom = pe.Integers if integer else pe.Reals
    m.n = pe.Var(m.S, within=dom, bounds=lambda _, i: (int(lo[i]), int(hi[i])),
                 initialize=lambda _, i: float(np.clip(model.lower[i], lo[i], hi[i])))
    if isinstance(model, StratifiedDesign):
        m.total = pe.Constraint(expr=sum(m.n[i] for i in m.S) == model.total)
    m.linear = pe.ConstraintList()
    for con in model.constraints:
        for row, rhs in zip(con.A, con.b):
            if not np.any(row != 0):
                # a row without variables is a constant: Pyomo refuses it (a trivial Boolean). A satisfied one is
                # dropped; a violated one is kept as 0·n_0 (sense) rhs, which no point meets
                if {"<=": 0 <= rhs, ">=": 0 >= rhs}.get(con.sense, rhs == 0):
                    continue
                lhs = m.n[0] - m.n[0]
            else:
                lhs = sum(float(row[i]) * m.n[i] for i in range(k) if row[i] != 0)
            if con.sense == "<=":
                m.linear.add(lhs <= float(rhs))
            elif con.sense == ">=":
                m.linear.add(lhs >= float(rhs))
            else:
                m.linear.add(lhs == float(rhs))
    m.extra = pe.ConstraintList()
    m.precision = pe.ConstraintList()

    if formulation == "minlp":
        objective_W = d.alpha2[:, None] * d.variable_weights[None, :]

        def scaled(divisor):   # Σ f_i / divisor with the divisor folded into the weights
            if d.J > 1:        # Σ_i α_i² Σ_j w_j t_ij: the separable program's objective row
                return _row_expr(d, objective_W, m.n, hi, divisor, clock)
            terms = []
            for i in range(k):
                terms.append(_term_expr(d, i, m.n[i], float(hi[i]), divisor))
                if clock is not None:
                    clock.tick(clock.done + 1)
            return sum(terms)

        for t in targets:
            # the target's row of the separable program: Σ_i β_i² t_ij(n_i) ≤ bound + fpc constant
            W = np.zeros((k, d.J))
            W[:, t.variable] = t.weights
            rhs = float(t.bound + t.fpc_const)
            m.precision.add(_row_expr(d, W, m.n, hi, rhs, clock) <= 1.0)

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
