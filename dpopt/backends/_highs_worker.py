"""HiGHS's side of a run with a hard deadline (the caller's side and the reasons: :mod:`dpopt.backends._highs_run`).

Run as a script, ``python _highs_worker.py JOBS_FD RESULTS_FD``, this is the worker process: it serves jobs read
from one pipe and writes what HiGHS finds to the other, until the job pipe closes. It imports only numpy and
highspy (not dpopt), so a worker starts in about 0.1 s and holds nothing of its caller's memory. Where there is
no worker, :func:`run_job` runs in the caller's own process. Messages are plain tuples:

* caller → worker: a job, the dict of :func:`run_job`'s arguments;
* worker → caller: ``("ready",)`` once, then per job any number of ``("incumbent", value, point)``,
  ``("bound", primal, dual, nodes)`` and ``("log", text)``, and last ``("done", answer)`` (:func:`answer_of`) or
  ``("error", text)``.
"""

from __future__ import annotations

import math
import time

import numpy as np

#: seconds between two bound messages (HiGHS's MIP callback runs thousands of times a second)
BOUND_EVERY = 0.05

_LP_ARRAYS = ("col_cost_", "col_lower_", "col_upper_", "row_lower_", "row_upper_")


def model_of(arrays: dict):
    """A ``highspy.HighsModel`` from the arrays of a model (``integrality`` an empty list for an LP)."""
    import highspy

    model = highspy.HighsModel()
    lp = model.lp_
    lp.num_col_, lp.num_row_ = arrays["num_col"], arrays["num_row"]
    for name in _LP_ARRAYS:
        setattr(lp, name, arrays[name])
    lp.offset_ = arrays["offset"]
    lp.sense_ = highspy.ObjSense(arrays["sense"])
    lp.a_matrix_.format_ = highspy.MatrixFormat(arrays["a_format"])
    lp.a_matrix_.start_ = arrays["a_start"]
    lp.a_matrix_.index_ = arrays["a_index"]
    lp.a_matrix_.value_ = arrays["a_value"]
    if arrays["integrality"]:
        lp.integrality_ = [highspy.HighsVarType(v) for v in arrays["integrality"]]
    hess = arrays.get("hessian")
    if hess:
        model.hessian_.dim_ = hess["dim"]
        model.hessian_.format_ = highspy.HessianFormat(hess["format"])
        model.hessian_.start_, model.hessian_.index_, model.hessian_.value_ = (hess["start"], hess["index"],
                                                                               hess["value"])
    return model


def reset_scheduler(highs_class) -> None:
    """Reset HiGHS's process-wide task scheduler, so that the next solve starts it with the ``threads`` it asks
    for (HiGHS keeps the first solve's count otherwise)."""
    reset = getattr(highs_class, "resetGlobalScheduler", None)
    if reset is not None:
        reset(True)


def run_job(highs_class, arrays, options, start, interrupt_after, columns, verbose, send=None, report=None):
    """Build HiGHS (``highs_class``, ``highspy.Highs``) from ``arrays`` and ``options`` and run it from
    ``start`` (``(indices, values)`` or None): past ``interrupt_after`` seconds (None: never) a MIP callback
    interrupts it. ``send(message)`` (a worker's pipe): where incumbents, bounds and, when ``verbose``, the log
    go; without it HiGHS logs to the console when ``verbose``. ``report(primal, dual)``: HiGHS's incumbent value
    and bound as it runs. Returns :func:`answer_of`'s answer."""
    if "threads" in options:        # HiGHS's scheduler is process-wide: started again with the threads asked for
        reset_scheduler(highs_class)
    h = highs_class()
    h.setOptionValue("output_flag", False)
    h.passModel(model_of(arrays))
    for name, value in options.items():
        h.setOptionValue(name, value)
    if send is not None:
        h.setOptionValue("log_to_console", False)
        if verbose:
            h.cbLogging.subscribe(lambda event: send(("log", event.message)))
    h.setOptionValue("output_flag", bool(verbose))
    if start is not None:
        idx, values = start
        h.setSolution(len(idx), np.asarray(idx, dtype=np.int32), np.asarray(values, dtype=float))
    stopped: list = []
    if interrupt_after is not None or report is not None or send is not None:
        _subscribe(h, interrupt_after, stopped, send, report, columns)
    type(h).run(h)
    return answer_of(h, columns, bool(stopped))


def _subscribe(h, interrupt_after, stopped, send, report, columns) -> None:
    hard = None if interrupt_after is None else time.monotonic() + interrupt_after
    last_sent = [-math.inf]

    def on_interrupt(event):
        d = event.data_out
        if report is not None:
            report(d.mip_primal_bound, d.mip_dual_bound)
        now = time.monotonic()
        if send is not None and now - last_sent[0] >= BOUND_EVERY:
            last_sent[0] = now
            send(("bound", float(d.mip_primal_bound), float(d.mip_dual_bound), int(d.mip_node_count)))
        if hard is not None and now > hard:
            stopped.append(True)
            event.interrupt()

    h.cbMipInterrupt.subscribe(on_interrupt)
    if send is not None:
        def on_incumbent(event):
            d = event.data_out
            point = np.array(d.mip_solution, dtype=float)
            send(("incumbent", float(d.objective_function_value), point if columns is None else point[:columns]))

        h.cbMipImprovingSolution.subscribe(on_incumbent)


_INFO_NAMES: list = []


def info_dict(raw) -> dict:
    """HiGHS's info fields as a dict of numbers."""
    if not _INFO_NAMES:
        _INFO_NAMES.extend(name for name in dir(raw) if not name.startswith("_") and not callable(getattr(raw, name)))
    return {name: getattr(raw, name) for name in _INFO_NAMES}


def answer_of(h, columns, stopped: bool) -> dict:
    """What HiGHS ended with, in plain values: ``status`` (HighsModelStatus as an int; an interrupt by the
    deadline as the time limit), ``text``, ``info`` (dict), ``solution`` (dict of arrays; with ``columns``
    only the first ``columns`` values of the point and no duals or row values), ``run_time``."""
    import highspy

    cls = type(h)
    status = cls.getModelStatus(h)
    if stopped and status == highspy.HighsModelStatus.kInterrupt:
        status = highspy.HighsModelStatus.kTimeLimit
    sol = cls.getSolution(h)
    empty = np.zeros(0)
    if columns is None:
        solution = dict(col_value=np.asarray(sol.col_value, dtype=float),
                        row_value=np.asarray(sol.row_value, dtype=float),
                        col_dual=np.asarray(sol.col_dual, dtype=float), row_dual=np.asarray(sol.row_dual, dtype=float),
                        value_valid=bool(sol.value_valid), dual_valid=bool(sol.dual_valid))
    else:
        solution = dict(col_value=np.asarray(sol.col_value, dtype=float)[:columns], row_value=empty, col_dual=empty,
                        row_dual=empty, value_valid=bool(sol.value_valid), dual_valid=False)
    return dict(status=int(status), text=cls.modelStatusToString(h, status), info=info_dict(cls.getInfo(h)),
                solution=solution, run_time=float(cls.getRunTime(h)))


def serve(jobs, results) -> None:
    """The worker's loop: one job at a time until the job pipe closes."""
    import highspy

    results.send(("ready",))
    while True:
        try:
            job = jobs.recv()
        except (EOFError, OSError):
            return
        try:
            results.send(("done", run_job(highspy.Highs, **job, send=results.send)))
        except Exception as exc:    # noqa: BLE001 - the caller reports it as the run's failure
            try:
                results.send(("error", f"{type(exc).__name__}: {exc}"))
            except OSError:
                return


def main(argv) -> None:
    from multiprocessing.connection import Connection

    jobs = Connection(int(argv[1]), writable=False)
    results = Connection(int(argv[2]), readable=False)
    serve(jobs, results)


if __name__ == "__main__":
    import sys

    main(sys.argv)
