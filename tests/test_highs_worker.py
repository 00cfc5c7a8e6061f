"""HiGHS's worker process (dpopt/backends/_highs_run.py; docs/constrained.md, "HiGHS's node queue"): the same
answers as HiGHS in this process, its log passed on, and the faults a process can have (a worker killed while
idle, a worker dying in a run, a fork of the caller, descriptors it must not hold) end as a status or are
survived, never as a hang or a traceback."""

import os
import select

import numpy as np
import pytest

import dpopt
from dpopt.backends import _highs_run as H
from dpopt.backends.exact.constrained import highs_milp as HM
from dpopt.formulations.separable import program_of, ranges, secant_milp
from highs_faults import use_faulty_worker, was_killed

pytestmark = pytest.mark.skipif(os.name != "posix" or not os.path.isdir("/proc/self"),
                                reason="POSIX pipes to the worker; reads /proc")


def _milp(seed, k=30):
    rng = np.random.default_rng(seed)
    d = dpopt.StratifiedDesign(rng.integers(50, 500, k), rng.uniform(0.5, 5, k), 300, 1.0)
    d.add_cost_budget(rng.uniform(1, 3, k), 1500.0)
    prog = program_of(d)
    lo, hi = ranges(d)
    return secant_milp(prog, lo, hi, anchor=np.sqrt(lo * hi), obj_scale=1.0)


@pytest.fixture(autouse=True)
def fresh_workers():
    H.close_workers()
    yield
    H.close_workers()


def _in_process(milp):
    """The oracle: HiGHS on the same model in this process, with no worker."""
    import highspy
    h = HM.highs_model(milp, True)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h.getInfo().objective_function_value, np.round(np.asarray(h.getSolution().col_value)[:milp.k])


@pytest.mark.parametrize("seed", range(6))
def test_the_worker_answers_as_highs_in_this_process(seed):
    milp = _milp(seed)
    value, n = _in_process(milp)
    res = HM.highs_solve(milp, 0.0, 0.0, 60.0)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(value * milp.obj_scale, rel=1e-9)
    assert res.bound <= res.objective * (1 + 1e-9)
    assert milp.c[:milp.k] @ res.n == pytest.approx(milp.c[:milp.k] @ n, rel=1e-6)


def test_a_start_and_the_options_reach_the_worker():
    milp = _milp(7)
    value, n = _in_process(milp)
    # a node limit of 0 leaves HiGHS with the start it was given (or a better point) and a time-limit status
    res = HM.run_highs(HM.milp_arrays(milp), {"mip_max_nodes": 0, "presolve": "off", "mip_heuristic_effort": 0.0},
                       60.0, columns=milp.k, start=(np.arange(milp.k), n))
    assert res.info.primal_solution_status == 2
    assert res.info.objective_function_value == pytest.approx(value, rel=1e-9)


def test_the_log_is_passed_on_when_verbose(capfd):
    milp = _milp(8)
    HM.highs_solve(milp, 0.0, 0.0, 60.0, verbose=True)
    out, _ = capfd.readouterr()
    assert "Solving report" in out
    HM.highs_solve(milp, 0.0, 0.0, 60.0, verbose=False)
    out, _ = capfd.readouterr()
    assert "Solving report" not in out


def test_a_worker_killed_while_idle_is_replaced():
    milp = _milp(9)
    first = HM.highs_solve(milp, 0.0, 0.0, 60.0)
    (worker,) = H._IDLE
    worker.process.kill()
    worker.process.wait()
    again = HM.highs_solve(milp, 0.0, 0.0, 60.0)
    assert again.status == "optimal" and again.objective == pytest.approx(first.objective, rel=1e-12)


def test_a_worker_that_dies_in_a_run_ends_it_as_an_error(monkeypatch, tmp_path):
    marker = use_faulty_worker(monkeypatch, tmp_path, "die")
    milp = _milp(10)
    res = HM.highs_solve(milp, 0.0, 0.0, 60.0)
    assert was_killed(marker)
    assert res.status == "error" and "died" in res.text and res.bound == -np.inf
    assert not H._IDLE                                                  # the dead worker is not kept
    monkeypatch.undo()
    assert HM.highs_solve(milp, 0.0, 0.0, 60.0).status == "optimal"     # the next run has a new worker


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks the caller")
def test_a_forked_child_of_the_caller_uses_workers_of_its_own():
    milp = _milp(11)
    parent = HM.highs_solve(milp, 0.0, 0.0, 60.0)
    (mine,) = H._IDLE                    # the parent keeps a worker
    pid = os.fork()
    if pid == 0:                          # the child: its own worker, the same answer
        code = 1
        try:
            res = HM.highs_solve(milp, 0.0, 0.0, 60.0)
            same = res.status == "optimal" and abs(res.objective - parent.objective) <= 1e-9 * abs(parent.objective)
            own = len(H._IDLE) == 1 and H._IDLE[0].process.pid != mine.process.pid
            code = 0 if same and own else 2 if not same else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert HM.highs_solve(milp, 0.0, 0.0, 60.0).status == "optimal"     # the parent's worker still serves it


def test_the_worker_holds_no_descriptor_of_the_caller():
    """A reader waiting for the end of a pipe the caller writes to must see it when the caller closes it, though
    a worker was started while it was open (a benchmark reads its children's output that way)."""
    read_end, write_end = os.pipe()
    try:
        HM.highs_solve(_milp(12), 0.0, 0.0, 60.0)      # starts the worker while write_end is open
        assert H._IDLE
        os.close(write_end)
        write_end = None
        ready, _, _ = select.select([read_end], [], [], 10.0)
        assert ready and os.read(read_end, 1) == b""        # end of file: nobody else holds the write end
    finally:
        os.close(read_end)
        if write_end is not None:
            os.close(write_end)


def test_a_worker_slow_to_start_is_not_waited_for_past_the_deadline(monkeypatch, tmp_path):
    """The run goes on in this process with the time left (none here), and the next run uses the worker once it
    has started."""
    use_faulty_worker(monkeypatch, tmp_path, "slow")
    milp = _milp(13)
    value, _ = _in_process(milp)
    quick = HM.highs_solve(milp, 0.0, 0.0, 0.05)
    assert quick.status in ("time_limit", "optimal")
    assert quick.bound <= value * milp.obj_scale * (1 + 1e-9)
    assert len(H._IDLE) == 1 and not H._IDLE[0].ready and not H._NO_WORKER     # still starting, kept
    later = HM.highs_solve(milp, 0.0, 0.0, 60.0)
    assert later.status == "optimal" and later.objective == pytest.approx(value * milp.obj_scale, rel=1e-9)
    assert len(H._IDLE) == 1 and H._IDLE[0].ready


def test_without_a_worker_highs_runs_in_this_process(monkeypatch, tmp_path):
    use_faulty_worker(monkeypatch, tmp_path, "broken")
    monkeypatch.setattr(H, "_NO_WORKER", [])
    milp = _milp(14)
    value, _ = _in_process(milp)
    res = HM.highs_solve(milp, 0.0, 0.0, 60.0)
    assert H._NO_WORKER and not H._ALL                   # the worker died starting and is not tried again
    assert res.status == "optimal" and res.objective == pytest.approx(value * milp.obj_scale, rel=1e-9)


def test_guarded_objects_per_thread_and_overlapping_blocks():
    """cvxpy's HiGHS objects are guarded only inside a block, only in the thread that opened it; two threads'
    blocks that overlap (A opens, B opens, A closes, B closes) leave B guarded to its end and the real class in
    place after both."""
    import threading
    import highspy

    real = highspy.Highs
    step = {name: threading.Event() for name in ("a_open", "b_open", "a_closed", "outside_made")}
    made = {}

    def guarded(h):
        return "run" in vars(h)      # guard_highs replaces the instance's run (and the getters)

    def thread_a():
        with H.guarded_highs_objects(5.0, False):
            step["a_open"].set()
            step["b_open"].wait(10)
            made["a"] = guarded(highspy.Highs())
            step["outside_made"].wait(10)
        step["a_closed"].set()

    def thread_b():
        step["a_open"].wait(10)
        with H.guarded_highs_objects(5.0, False):
            step["b_open"].set()
            step["a_closed"].wait(10)
            made["b_after_a"] = guarded(highspy.Highs())

    def outside():
        step["b_open"].wait(10)
        made["outside"] = guarded(highspy.Highs())      # no block in this thread
        step["outside_made"].set()

    threads = [threading.Thread(target=f) for f in (thread_a, thread_b, outside)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert made == {"a": True, "outside": False, "b_after_a": True}
    assert highspy.Highs is real
    assert not guarded(highspy.Highs())
