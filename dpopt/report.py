"""Plain-text reports of solutions for the CLI (one function per model family)."""

from __future__ import annotations

import numpy as np

from .result import Solution


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
        row += [pt[i], nb["rate"][i], nb["epsilon"][i]] + ([nb["scale"][i]] if one else [])
        row += [br["sampling"][i], br["noise"][i]]
        rows.append(row)
    heads = ["stratum"] + (["domain"] if model.domains is not None else []) + ["N"] + (["sigma2"] if one else [])
    heads += ["n" if integer else "x", "rate", "eps_i"] + (["noise scale"] if one else []) + ["sampling var", "noise var"]
    fmts = ["s"] + (["s"] if model.domains is not None else []) + ["d"] + ([".4g"] if one else [])
    fmts += ["d" if integer else ".4f", ".4f", ".4g"] + ([".4g"] if one else []) + [".5g", ".5g"]
    lines.append("")
    lines.append(table(heads, rows, fmts))
    lines.append("")
    if not one:
        lines.append(f"variables           : {', '.join(model.variables)} (budget shares "
                     f"{', '.join(f'{s:.4g}' for s in model.shares)}, objective weights "
                     f"{', '.join(f'{w:.4g}' for w in model.variable_weights)})")
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
            state = "binds" if abs(v - t.bound) <= 1e-6 * t.bound else ("met" if v <= t.bound * (1 + 1e-9) else "MISSED")
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
