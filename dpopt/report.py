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
    rows = []
    for i in range(model.k):
        rows.append([i + 1, int(model.N[i]), float(model.sigma2[i]), pt[i], nb["rate"][i], nb["epsilon"][i],
                     nb["scale"][i], br["sampling"][i], br["noise"][i]])
    lines.append("")
    lines.append(table(["stratum", "N", "sigma2", "n" if integer else "x", "rate", "eps_i", "noise scale",
                        "sampling var", "noise var"], rows,
                       ["d", "d", ".4g", "d" if integer else ".4f", ".4f", ".4g", ".4g", ".5g", ".5g"]))
    lines.append("")
    lines.append(f"objective g(n)      : {solution.objective:.10g}"
                 f"  (sampling {br['sampling_total']:.6g} + noise {br['noise_total']:.6g})")
    if model.objective_kind == "mean":
        lines.append(f"Var(mean estimate)  : {br['variance_of_mean']:.6g}")
    if solution.certificate is not None:
        lines.append(f"certificate         : {solution.certificate}")
    if integer:
        summ = model.solution_summary(pt)
        lines.append(f"ratio Neyman/this   : {summ['ratio_neyman']:.4f}")
        lines.append(f"ratio proport./this : {summ['ratio_proportional']:.4f}")
    return "\n".join(lines)
