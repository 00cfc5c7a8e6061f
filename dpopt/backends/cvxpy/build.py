"""cvxpy translation of a stratified design: DCP expressions of the terms (DLap/TuLap exactly, Laplace in
DNLP form), the problem builder, and the linearisation bound that certifies a relaxation point
(the routes that solve them are in :mod:`.stratified`)."""

from __future__ import annotations

import numpy as np

from ...models.stratified import MinCostDesign, StratifiedDesign
from ...numerics import fill_cheapest
from .._highs import absorb_highs_banner


class CvxpyUnsupported(ValueError):
    """The model is not DCP-representable in this backend."""


def _design(model) -> StratifiedDesign:
    return model.design if isinstance(model, MinCostDesign) else model


def dcp_coefficients(d: StratifiedDesign):
    """(a, b, const) with f_i(n) = a_i/n + b_i n + const_i, or raise CvxpyUnsupported."""
    form = d.linear_noise_form()
    if form is None:
        sens = ", ".join(f"{x:g}" for x in d.sensitivities)
        why = d.noise_mechanism(0).support("growth_coefficients", d.sensitivity_of(0))
        raise CvxpyUnsupported(f"mechanism {d.mechanism.name!r} with sensitivity {sens} is not DCP: "
                               + (str(why) if not why else "its growth form holds for one variable at the whole "
                                  "budget with coefficients >= 0"))
    return form


def noise_variance_hook(mech):
    """The mechanism's ``cvxpy_variance`` hook (its variance as a smooth cvxpy expression of the nominal budget,
    DNLP), or raise CvxpyUnsupported naming the missing hook."""
    why = mech.support("cvxpy_variance")
    if not why:
        raise CvxpyUnsupported(f"{why}; so the DNLP cannot be written: use the pyomo (formulation='milp') "
                               "or scipy backend, or give the mechanism the hook")
    return mech.cvxpy_variance


def _objective_expr(d: StratifiedDesign, n, form: str, upper=None):
    """Σ f_i(n_i) as a cvxpy expression: DCP (inv_pos + linear) or DNLP (log-space local budget)."""
    import cvxpy as cp

    if form == "dcp":
        a, b, const = dcp_coefficients(d)
        return a @ cp.inv_pos(n) + b @ n + float(const.sum())
    lcn = d.log_c + d.log_N
    hi = d.N.astype(float) if upper is None else np.asarray(upper, dtype=float)
    large = np.logaddexp(0.0, lcn - np.log(hi)) >= d.sensitivity_of(0)   # L_i/Δ ≥ 1 on the whole range
    parts = []
    for flag in (False, True):
        idx = np.flatnonzero(large == flag)
        if idx.size == 0:
            continue
        m = n[idx]
        L = cp.logistic(lcn[idx] - cp.log(m))
        noise = noise_variance_hook(d.noise_mechanism(0))(cp, L, d.sensitivity_of(0), large=bool(flag))
        parts.append(cp.sum(cp.multiply(d.alpha2[idx], cp.multiply(d.sigma2[idx] + noise, cp.power(m, -1)))))
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def term_expression(model, i, var, variable=0):
    """cvxpy expression of the unit term t_ij(var) = (σ_ij² + γ_j²(var))/var of stratum(s) ``i`` (an index or
    an index array, with ``var`` a matching cvxpy expression) and study variable ``variable``: the model's own
    term, never a re-derived formula. DCP where the mechanism has the exact form a/var + b·var + const (DLap and
    TuLap at sensitivity 1 with the whole budget); otherwise :class:`CvxpyUnsupported` with the reason (use the
    Pyomo helper :func:`dpopt.backends.pyomo.term_expression`)."""
    import cvxpy as cp

    d = _design(model)
    j = d.variable_index(variable)
    idx = np.atleast_1d(np.asarray(i, dtype=np.int64))
    form = d._unit_linear_form(j, idx)
    if form is None:
        raise CvxpyUnsupported(f"the unit term of mechanism {d.mechanism.name!r} (sensitivity {d.sensitivity_of(j):g}, "
                               f"budget share {float(d.shares[j]):g}) has no DCP form (only DLap/TuLap with "
                               "sensitivity 1 and the whole budget have); write the row in Pyomo "
                               "(dpopt.backends.pyomo.term_expression)")
    a, b, const = form        # t = a/var + b·var + const, the mechanism's growth form (const = c1/(cN))
    if np.ndim(i) == 0:
        return float(a[0]) * cp.inv_pos(var) + float(b[0]) * var + float(const[0])
    return cp.multiply(a, cp.inv_pos(var)) + cp.multiply(b, var) + const


def _row_dcp(d: StratifiedDesign, W: np.ndarray, n):
    """Σ_ij W_ij t_ij(n_i) as a DCP expression (a row of the compiled program)."""
    out = 0
    for j in np.flatnonzero(np.any(W != 0, axis=0)):
        idx = np.flatnonzero(W[:, j])
        out = out + W[idx, j] @ term_expression(d, idx, n[idx], int(j))
    return out


def _refusal(model, form: str) -> str | None:
    """Why the ``form`` problem cannot hold every row of ``model`` (None: it can)."""
    d = _design(model)
    targets = list(model.precision_targets)
    if form == "dnlp" and (d.J > 1 or targets):
        return ("form='dnlp' writes one variable's objective only; this model has "
                + ", ".join(model.extended_features()) + ": use form='dcp' (DLap/TuLap at sensitivity 1) or "
                "dpopt.build_pyomo_model, which writes every row")
    if form == "dcp" and d.J > 1:
        bad = [d.variables[j] for j in range(d.J) if d._unit_linear_form(j) is None]
        if bad:
            return (f"variable(s) {', '.join(map(repr, bad))} at budget share(s) below 1 (or mechanism "
                    f"{d.mechanism.name!r}) have no DCP term: the problem cannot be written; use "
                    "dpopt.build_pyomo_model, which writes every row")
    return None


def build_cvxpy_problem(model, integer: bool = False, form: str = "dcp"):
    """``(problem, {"n": variable, "scale": s, "g": expression})`` for a StratifiedDesign or MinCostDesign.

    ``form="dcp"`` (DLap/TuLap with sensitivity 1; raises :class:`CvxpyUnsupported` otherwise) gives a DCP
    problem for Clarabel or SCIP; ``form="dnlp"`` gives a smooth formulation of any built-in mechanism for
    ``problem.solve(solver="IPOPT", nlp=True)`` (continuous only). The sum problem's objective is ``g/s``;
    add constraints with ``cp.Problem(problem.objective, problem.constraints + [...])`` (a row of your own
    from :func:`term_expression`). Every row of the model is written (bounds, total, linear rows, precision
    targets as Σ W t/rhs ≤ 1, the min-cost variance bound; ``"precision"`` in the dict lists the target rows),
    or the model is refused with :class:`CvxpyUnsupported` and the reason (several variables at budget
    shares below 1, or ``form="dnlp"`` with several variables or precision targets).
    """
    import cvxpy as cp

    if not isinstance(model, (StratifiedDesign, MinCostDesign)):
        raise TypeError(f"model must be a StratifiedDesign or MinCostDesign, got {type(model).__name__}")
    if form not in ("dcp", "dnlp"):
        raise ValueError(f"form must be 'dcp' or 'dnlp', got {form!r}")
    if form == "dnlp" and integer:
        raise ValueError("form='dnlp' is continuous only (cvxpy's NLP mode has no integer variables)")
    why = _refusal(model, form)
    if why is not None:
        raise CvxpyUnsupported(why)
    d = _design(model)
    k = model.k
    n = cp.Variable(k, integer=bool(integer), name="n")
    if d.J > 1:
        g = _row_dcp(d, d.alpha2[:, None] * d.variable_weights[None, :], n)
    else:
        g = _objective_expr(d, n, form, upper=model.upper)
    cons = [n >= model.lower.astype(float), n <= model.upper.astype(float)]
    for con in model.constraints:
        lhs = con.A @ n
        if con.sense == "<=":
            cons.append(lhs <= con.b)
        elif con.sense == ">=":
            cons.append(lhs >= con.b)
        else:
            cons.append(lhs == con.b)
    precision = []
    for t in model.precision_targets:
        W = np.zeros((k, d.J))
        W[:, t.variable] = t.weights
        rhs = float(t.bound + t.fpc_const)
        precision.append(_row_dcp(d, W, n) / rhs <= 1.0)
    cons += precision
    if isinstance(model, StratifiedDesign):
        cons.append(cp.sum(n) == model.total)
        x0 = np.clip(model.N * model.total / model.N.sum(), model.lower, model.upper)
        scale = float(np.sum(d.terms(x0)))
        prob = cp.Problem(cp.Minimize(g / scale), cons)
    else:
        x0 = model.upper.astype(float)
        scale = 1.0
        V0 = model.variance_target
        cons.append(g / V0 <= model.variance_budget / V0)
        prob = cp.Problem(cp.Minimize(model.cost @ n), cons)
    if form == "dnlp":
        n.value = x0.astype(float)   # IPOPT's starting point
    return prob, {"n": n, "scale": scale, "g": g, "precision": precision}


def _linear_minimum(model, c, extra=None):
    """min c·y over the model's polytope (plus ``extra(y)`` constraints): (value, y) or (nan, None).

    The sum-and-bounds polytope is a continuous knapsack: filled greedily by increasing c, exactly.
    """
    lo, hi = model.lower.astype(float), model.upper.astype(float)
    if extra is None and isinstance(model, StratifiedDesign) and model.is_plain:
        y = fill_cheapest(c, lo, hi, model.total)
        return float(c @ y), y
    import cvxpy as cp

    y = cp.Variable(model.k)
    cons = [y >= lo, y <= hi]
    for con in model.constraints:
        lhs = con.A @ y
        cons.append(lhs <= con.b if con.sense == "<=" else lhs >= con.b if con.sense == ">=" else lhs == con.b)
    if isinstance(model, StratifiedDesign):
        cons.append(cp.sum(y) == model.total)
    if extra is not None:
        cons += extra(y)
    prob = cp.Problem(cp.Minimize(c @ y), cons)
    solver = "HIGHS" if "HIGHS" in cp.installed_solvers() else "CLARABEL"
    try:
        absorb_highs_banner()   # HiGHS prints a banner on stdout on its first use in a process
        prob.solve(solver=solver)
    except Exception:  # a failed bound is reported as no bound, never as a crash
        return float("nan"), None
    if prob.status != "optimal" or y.value is None:
        return float("nan"), None
    return float(prob.value), np.asarray(y.value, dtype=float)


def linearisation_bound(model, x) -> float:
    """A lower bound on the continuous optimum from convexity of g at the point ``x``.

    Sum problem: g(y) ≥ g(x) + ∇g(x)·(y − x), so ``g(x) + min_y ∇g(x)·(y − x)`` bounds g* from below
    (the Frank–Wolfe gap). Min-cost: {g ≤ V0} lies inside the half-space {g(x) + ∇g(x)·(y − x) ≤ V0},
    so the LP over that half-space bounds the minimum cost from below.
    """
    d = _design(model)
    x = np.asarray(x, dtype=float)
    grad = d.terms_derivative(x, 1)
    if isinstance(model, StratifiedDesign):
        val, _ = _linear_minimum(model, grad)
        return model.objective_value(x) + val - float(grad @ x)
    gx = float(np.sum(d.terms(x)))
    rhs = model.variance_budget - gx + float(grad @ x)
    unit = float(np.max(np.abs(grad))) or 1.0     # keep the LP row well scaled
    val, _ = _linear_minimum(model, np.asarray(model.cost, dtype=float),
                             extra=lambda y: [(grad / unit) @ y <= rhs / unit])
    return val
