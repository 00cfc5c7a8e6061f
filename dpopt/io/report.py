"""Plain-text reports of solutions (``model.report(solution)``, the CLI): one function per model family,
each registered with the models (:func:`~dpopt.models.base.register_report`), which :meth:`Model.report
<dpopt.models.base.Model.report>` and :func:`report` look up. Reports live here, with the file formats, so the
model modules hold only mathematics; ``import dpopt`` (through :mod:`dpopt.io`) registers them."""

from __future__ import annotations

import numpy as np

from ..models.controlled_precision import ControlledPrecisionDesign
from ..models.hierarchy import HierarchyBudget
from ..models.importance import ImportanceSampling, uniform_probabilities
from ..models.sample_size import SampleSizeProgram
from ..models.sample_size_study import SampleSizeStudy
from ..models.robust import RobustDesign
from ..models.stratified import MinCostDesign, StratifiedDesign, target_met
from ..models.base import register_report, report  # noqa: F401  (report: the public entry point)
from ..result import Solution


def table(headers: list[str], rows: list[list], formats: list[str] | None = None) -> str:
    """A right-aligned text table; ``formats`` are format specs per column (default ``g``)."""
    formats = formats or ["g"] * len(headers)
    cells = [[_fmt(v, f) for v, f in zip(r, formats)] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def _fmt(v, f: str) -> str:
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    return format(v, f)


def header(model, solution: Solution) -> list[str]:
    lines = [f"model    : {model!r}" + (f"  [{model.name}]" if getattr(model, "name", "") else ""),
             f"backend  : {solution.backend}" + (f" ({solution.solver})" if solution.solver else "")
             + f"   status: {solution.status.value}   time: {solution.wall_time:.4g} s"]
    if solution.message:
        lines.append(f"message  : {solution.message}")
    return lines


@register_report(StratifiedDesign)
def stratified_report(model, solution: Solution) -> str:
    lines = header(model, solution)
    pt = solution.point
    if pt is None:
        return "\n".join(lines)
    br = model.variance_breakdown(pt)
    nb = model.nominal_budgets(pt)
    integer = solution.n is not None
    one = model.J == 1
    rows = []
    for i in range(model.k):
        row = [model.labels[i]]
        if model.domains is not None:
            row.append(model.domains[i])
        row += [int(model.N[i])] + ([float(model.sigma2[i])] if one else [])
        row += [pt[i], nb["rate"][i], nb["epsilon"][i]] + ([nb["delta"][i]] if "delta" in nb else [])
        row += [nb["scale"][i]] if one else []
        row += [br["sampling"][i], br["noise"][i]]
        rows.append(row)
    heads = ["stratum"] + (["domain"] if model.domains is not None else []) + ["N"] + (["sigma2"] if one else [])
    zcdp, approx = nb["guarantee"] == "zcdp", "delta" in nb
    heads += ["n" if integer else "x", "rate", "rho" if zcdp else "nominal eps"] + (["nominal delta"] if approx else [])
    heads += (["noise scale"] if one else []) + ["sampling var", "noise var"]
    fmts = ["s"] + (["s"] if model.domains is not None else []) + ["d"] + ([".4g"] if one else [])
    fmts += ["d" if integer else ".4f", ".4f", ".4g"] + ([".4g"] if approx else []) + ([".4g"] if one else [])
    fmts += [".5g", ".5g"]
    lines.append("")
    lines.append(table(heads, rows, fmts))
    lines.append("")
    source = getattr(model, "frame_columns", None) or {}
    if source.get("sigma2_from"):
        clamp = source.get("sigma2_clamped_to")
        if clamp and not np.isscalar(clamp[0]):      # one range per variable
            where = "; ".join(f"{v} to [{a:g}, {b:g}]" for v, (a, b) in zip(model.variables, clamp))
            said = f", of the values clamped ({where}) as the release clamps them"
        elif clamp:
            said = f", of the values clamped to [{clamp[0]:g}, {clamp[1]:g}] as the release clamps them"
        else:
            said = ", unclamped (no value_range)"
        lines.append(f"sigma2              : from the {source['sigma2_from']}" + said)
    if not one:
        lines.append(f"variables           : {', '.join(model.variables)} (budget shares "
                     f"{', '.join(f'{s:.4g}' for s in model.shares)}, objective weights "
                     f"{', '.join(f'{w:.4g}' for w in model.variable_weights)})")
    if zcdp:
        lines.append(f"privacy             : {model.mechanism.name}, rho = {model.epsilon:g} (rho-zCDP): sampling gives "
                     "no amplification under zCDP, so the noise is the same at every n")
    elif approx:
        lines.append(f"privacy             : {model.mechanism.name}, (epsilon, delta) = ({model.epsilon:g}, "
                     f"{model.delta:g}) central; each sampled person's nominal (eps_i, delta_i) = "
                     "(log1p(expm1(eps) N_i/n_i), delta N_i/n_i), noise by the analytic Gaussian calibration")
    lines.append(f"objective g(n)      : {solution.objective:.10g}"
                 f"  (sampling {br['sampling_total']:.6g} + noise {br['noise_total']:.6g})")
    if model.objective_kind == "mean":
        lines.append(f"Var(mean estimate)  : {br['variance_of_mean']:.6g}")
    if model.cost is not None:
        lines.append(f"cost                : {float(model.cost @ np.asarray(pt, dtype=float)):.10g}")
    lines += constrained_lines(model, pt)
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    if integer and model.is_plain:
        summ = model.solution_summary(pt)
        lines.append(f"ratio Neyman/this   : {summ['ratio_neyman']:.4f}")
        lines.append(f"ratio proport./this : {summ['ratio_proportional']:.4f}")
    return "\n".join(lines)


def constrained_lines(model, pt) -> list[str]:
    """Precision targets against their bounds, binding constraints and design warnings (stratified)."""
    design = getattr(model, "design", model)
    lines = []
    targets = getattr(model, "precision_targets", [])
    if targets:
        rows = []
        for t in targets:
            v = design.precision_value(t, pt)
            se = float(np.sqrt(max(v, 0.0)))
            achieved = {"variance": v, "se": se, "cv": se / abs(t.mean) if t.mean else float("nan")}[t.kind]
            # met/binds as the model decides them (the one feasibility test; models.stratified.target_met)
            state = "binds" if abs(v - t.bound) <= 1e-6 * t.bound else ("met" if target_met(t, v) else "MISSED")
            rows.append([t.name, design.variables[t.variable], t.kind, t.target, achieved, se, state])
        lines.append("")
        lines.append("precision targets:")
        lines.append(table(["target", "variable", "kind", "asked", "achieved", "SE", "status"], rows,
                           ["s", "s", "s", ".6g", ".6g", ".6g", "s"]))
    cons = getattr(model, "constraints", [])
    if cons:
        rep = design.constraint_report(pt) if model is design else _constraint_rows(cons, pt)
        lines.append("")
        lines.append("constraints:")
        lines.append(table(["constraint", "lhs", "sense", "rhs", "status"],
                           [[r["name"], r["lhs"], r["sense"], r["rhs"], "binds" if r["binding"] else "slack"]
                            for r in rep], ["s", ".10g", "s", ".10g", "s"]))
    if design.min_per_stratum is not None:
        lines.append(f"min_per_stratum     : {design.min_per_stratum}")
    n = np.asarray(pt)
    single = [design.labels[i] for i in np.flatnonzero((n == 1) & (design.N > 1))]   # a census needs no estimate
    if single:
        lines.append(f"warning             : {len(single)} stratum/strata with a single sampled unit "
                     f"({', '.join(single[:8])}{', ...' if len(single) > 8 else ''}): their variance cannot be "
                     f"estimated from the sample; min_per_stratum = 2 prevents this")
    if np.all(n == np.round(n)):
        rising = design.rising_strata(np.round(n).astype(np.int64))
        if rising.size:
            names = ", ".join(design.labels[i] for i in rising[:8])
            lines.append(f"note                : in {rising.size} stratum/strata ({names}{', ...' if rising.size > 8 else ''}) "
                         f"one more sampled unit would raise the variance: at this epsilon the noise grows with the "
                         f"sampling rate faster than the sampling error falls")
    return lines


def _constraint_rows(cons, pt):
    x = np.asarray(pt, dtype=float)
    out = []
    for con in cons:
        lhs = con.A @ x
        for r in range(con.A.shape[0]):
            out.append({"name": con.name, "sense": con.sense, "lhs": float(lhs[r]), "rhs": float(con.b[r]),
                        "binding": bool(abs(lhs[r] - con.b[r]) <= 1e-9 * max(1.0, abs(float(con.b[r]))))})
    return out


@register_report(HierarchyBudget)
def hierarchy_report(model, solution: Solution) -> str:
    lines = header(model, solution)
    if solution.x is None:
        return "\n".join(lines)
    d = solution.details
    b = getattr(model, "budget_name", "epsilon")      # "rho" for discrete Gaussian noise (zCDP)
    short = "eps" if b == "epsilon" else b
    rows = []
    for l in range(model.n_levels):
        rows.append([l + 1, model.hierarchy.sizes[l], float(model.weights[l]), float(solution.x[l]),
                     float(d["mse_per_level"][l]), float(d["bias2_per_level"][l]),
                     float(d["variance_per_level"][l]), float(d[f"uniform_{b}"][l]),
                     float(d["uniform_mse_per_level"][l])])
    lines.append("")
    lines.append(table(["level", "nodes", "weight", b, "MSE", "bias^2", "variance", f"uniform {short}",
                        "uniform MSE"], rows, ["d", "d", "g", ".6f", ".6g", ".4g", ".6g", ".6f", ".6g"]))
    lines.append("")
    lines.append(f"total {b:<14s}: {d[f'{b}_total_used']:.10g}")
    if b == "rho":
        lines.append("noise               : discrete Gaussian, sigma_l = sensitivity/sqrt(2 rho_l), counts truncated "
                     "at 0; rho-zCDP")
        for dl, e in d["epsilon_at_delta"].items():
            lines.append(f"as (eps, delta)     : eps = {e:.6g} at delta = {dl:g} (zCDP conversion)")
    lines.append(f"weighted MSE        : {d['weighted_mse']:.10g}   (uniform split: {d['uniform_weighted_mse']:.10g})")
    if model.program == "budget":
        lines.append(f"ratio uniform/this  : {d['ratio_uniform']:.4f}  (weighted MSE)")
    else:
        lines.append(f"MSE target          : {model.mse_target:.10g}")
        lines.append(f"ratio uniform/this  : {d['ratio_uniform']:.4f}  (total epsilon)")
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    lines.append("note: counts used by the optimiser must be public or previously released (paper §3.2)")
    return "\n".join(lines)


@register_report(MinCostDesign)
def min_cost_report(model, solution: Solution) -> str:
    lines = header(model, solution)
    pt = solution.point
    if pt is None:
        return "\n".join(lines)
    d = model.design
    br = d.variance_breakdown(pt)
    integer = solution.n is not None
    one = d.J == 1
    rows = [[d.labels[i]] + ([d.domains[i]] if d.domains is not None else []) + [int(d.N[i])]
            + ([float(d.sigma2[i])] if one else []) + [float(model.cost[i]), pt[i], br["sampling"][i],
                                                      br["noise"][i]] for i in range(model.k)]
    heads = (["stratum"] + (["domain"] if d.domains is not None else []) + ["N"] + (["sigma2"] if one else [])
             + ["cost", "n" if integer else "x", "sampling var", "noise var"])
    fmts = (["s"] + (["s"] if d.domains is not None else []) + ["d"] + ([".4g"] if one else [])
            + [".4g", "d" if integer else ".4f", ".5g", ".5g"])
    lines.append("")
    lines.append(table(heads, rows, fmts))
    lines.append("")
    lines.append(f"total cost          : {solution.objective:.10g}")
    lines.append(f"sample size         : {float(np.sum(pt)):.10g}")
    vt = "" if model.variance_target is None else f"  (target {model.variance_target:.10g})"
    lines.append(f"variance g(n)       : {br['total']:.10g}{vt}")
    if d.objective_kind == "mean":
        lines.append(f"Var(mean estimate)  : {br['variance_of_mean']:.6g}")
    lines += constrained_lines(model, pt)
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    return "\n".join(lines)


@register_report(ControlledPrecisionDesign)
def controlled_precision_report(model, solution: Solution) -> str:
    """Per stratum n; per domain its variance, SE, ρ_d and ratio V_d/ρ_d² (the largest is the objective)."""
    lines = header(model, solution)
    pt = solution.point
    if pt is None:
        return "\n".join(lines)
    d = model.design
    integer = solution.n is not None
    rows = [[d.labels[i]] + ([d.domains[i]] if d.domains is not None else []) + [int(d.N[i]), pt[i]]
            for i in range(model.k)]
    heads = ["stratum"] + (["domain"] if d.domains is not None else []) + ["N", "n" if integer else "x"]
    fmts = ["s"] + (["s"] if d.domains is not None else []) + ["d", "d" if integer else ".4f"]
    lines += ["", table(heads, rows, fmts), ""]
    v = model.domain_variances(pt)
    r = v / (model.rho * model.rho)
    worst = int(np.argmax(r))
    drows = [[name + (" *" if g == worst else ""), int(model.domain_strata[g].size), float(v[g]),
              float(np.sqrt(max(v[g], 0.0))), float(model.rho[g]), float(r[g])] for g, name in enumerate(model.domain_names)]
    lines.append(table(["domain", "strata", f"Var({model.estimate})", "SE", "rho", "Var/rho^2"], drows,
                       ["s", "d", ".6g", ".6g", ".6g", ".8g"]))
    lines.append("")
    lines.append(f"largest Var/rho^2   : {solution.objective:.10g}  (* the domain that attains it)")
    lines += constrained_lines(model.constraint_design(), pt)
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    return "\n".join(lines)


@register_report(SampleSizeStudy)
def sample_size_study_report(model, solution: Solution) -> str:
    lines = header(model, solution)
    d = solution.details
    if "mse" not in d:
        return "\n".join(lines)
    rows = [[r, n, m, s, g] for r, n, m, s, g in zip(d["rates"], d["n_grid"], d["mse"], d["se"], d["gain"])]
    rows.append([1.0, model.N, d["mse_population"], 0.0, 1.0])
    lines += ["", table(["rate", "n", "MSE", "MC s.e.", "gain"], rows, ["g", "d", ".6g", ".2g", ".4g"]), ""]
    lines.append(f"best rate           : {d['rate']:g} (n = {solution.n})")
    lines.append(f"sampling helps      : {'yes' if d['helps'] else 'no (release the population statistic)'}"
                 + ("" if not d["helps"] else f"; gain {d['best_gain']:.4g}, "
                    f"{d['z_score']:.1f} standard errors from no gain"))
    return "\n".join(lines)


@register_report(SampleSizeProgram)
def sample_size_report(model, solution: Solution) -> str:
    lines = header(model, solution)
    if solution.point is None:
        return "\n".join(lines)
    d = solution.details
    lines.append("")
    lines.append(table(["", "n", "rate", "nominal eps", "nominal delta", "sampling var", "noise var", "V"],
                       [["sample", d["n_star"], d["rate"], d["epsilon_n"], d["delta_n"],
                         d["sampling_variance"], d["noise_variance"], d["V_n"]],
                        ["population", model.N, 1.0, model.epsilon, model.delta, 0.0, d["V_N"], d["V_N"]]],
                       ["s", ".10g", ".6g", ".6g", ".3g", ".6g", ".6g", ".6g"]))      # n is real in a relaxation
    lines.append("")
    lines.append(f"gain V_N/V_n*       : {d['gain']:.6g}")
    lines.append(f"sampling helps      : {'yes' if d['helps'] else 'no (release the population statistic)'}")
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    return "\n".join(lines)


@register_report(ImportanceSampling)
def importance_report(model, solution: Solution) -> str:
    lines = header(model, solution)
    if solution.x is None:
        return "\n".join(lines)
    q = solution.x
    uni = uniform_probabilities(model.n, float(q.sum()))
    psi_u = model.amplified_loss(uni)
    rows = [["privacy-constrained", float(q.sum()), float(q.min()), float(q.max()),
             float(np.max(solution.details["psi"]))],
            ["uniform (same size)", float(uni.sum()), float(uni[0]), float(uni[0]), float(np.max(psi_u))]]
    lines.append("")
    lines.append(table(["sampling", "E[size]", "min q", "max q", "max central psi"], rows,
                       ["s", ".6g", ".4g", ".4g", ".6g"]))
    lines.append("")
    lines.append(f"records             : {model.n}")
    lines.append(f"central eps*        : {model.epsilon:g}")
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    return "\n".join(lines)


@register_report(RobustDesign)
def robust_report(model, solution: Solution) -> str:
    """Per-scenario variance and regret of the robust design (and of the nominal design), its worst regret and
    the price of robustness (docs/robust.md)."""
    lines = header(model, solution)
    if solution.n is None:
        return "\n".join(lines)
    d = solution.details
    n = solution.n
    lines.append("")
    lines.append(table(["stratum", "N", "n"], [[model.design.labels[i], int(model.design.N[i]), int(n[i])]
                                              for i in range(model.k)], ["s", "d", "d"]))
    lines.append("")
    regret = "scenario_regret" in d
    heads = ["scenario", "variance"] + (["optimum g*", "regret", "nominal regret"] if regret else [])
    rows = []
    for s, name in enumerate(d["scenario_names"]):
        row = [name, float(d["scenario_variance"][s])]
        if regret:
            row += [float(d["scenario_optimum"][s]), float(d["scenario_regret"][s]),
                    float(d["nominal_scenario_regret"][s]) if "nominal_scenario_regret" in d else None]
        rows.append(row)
    shown = rows if len(rows) <= 12 else rows[:6] + rows[-6:]
    lines.append(table(heads, shown, ["s", ".6g"] + ([".6g", ".6f", ".6f"] if regret else [])))
    if len(rows) > 12:
        lines.append(f"({len(rows) - 12} scenarios not shown)")
    lines.append("")
    if regret:
        lines.append(f"worst regret        : {d['worst_regret']:.8g}   (proven lower bound "
                     f"{d.get('lower_bound', float('nan')):.8g})")
        if "nominal_worst_regret" in d:
            lines.append(f"nominal worst regret: {d['nominal_worst_regret']:.8g}   (worst case saved: "
                         f"{100 * d['worst_case_saving']:.3g} %)")
            lines.append(f"price of robustness : {100 * d['price_of_robustness']:.4g} % more variance than the "
                         "nominal design under the nominal sigma2")
    else:
        lines.append(f"objective           : {solution.objective:.10g}")
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    return "\n".join(lines)
