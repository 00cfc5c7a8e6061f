"""HiGHS's faults, made on purpose inside dpopt's HiGHS worker (dpopt/backends/_highs_run.py), for the tests of
the hard deadline: a worker script that loads the real one and changes ``highspy.Highs.run`` so that, once HiGHS
has found a point, it writes its process id to a marker file and then either sleeps (HiGHS stuck where neither
its clock nor a callback is consulted, as a benchmark run found it in its node queue) or exits (a worker that
dies in a run); or a worker slow to start, or one that cannot start at all. ``use_faulty_worker`` points dpopt at
that script and ends the workers started before."""

import os
import textwrap

_SCRIPT = '''
import importlib.util as u
import os
import time

import highspy

if {fault!r} == "broken":
    raise ImportError("a worker that cannot start (say, no highspy for this Python)")
if {fault!r} == "slow":
    time.sleep(3.0)

spec = u.spec_from_file_location("dpopt_highs_worker_real", {real!r})
real = u.module_from_spec(spec)
spec.loader.exec_module(real)
run = highspy.Highs.run


def fault(event):
    with open({marker!r}, "w") as f:
        f.write(str(os.getpid()))
    if {fault!r} == "stick":
        time.sleep(60.0)
    elif {fault!r} == "die":
        os._exit(3)


def faulty_run(self):
    # HiGHS's presolve may solve a small MIP outright, with no incumbent reported: the fault is then never met
    self.setOptionValue("presolve", "off")
    self.cbMipImprovingSolution.subscribe(fault)
    return run(self)


highspy.Highs.run = faulty_run


def main(argv):
    real.main(argv)
'''


def use_faulty_worker(monkeypatch, tmp_path, fault: str):
    """Make the workers started from now on ``fault``: "stick" or "die" after HiGHS's first incumbent, "slow"
    to start (3 s), or "broken" (never starts). Returns the marker file, which holds the process id of the worker
    HiGHS ran in once HiGHS has found a point."""
    from dpopt.backends import _highs_run as H
    assert fault in ("stick", "die", "slow", "broken")
    marker = tmp_path / "pid"
    script = tmp_path / "faulty_worker.py"
    script.write_text(textwrap.dedent(_SCRIPT).format(real=H.WORKER_SCRIPT, marker=str(marker), fault=fault))
    H.close_workers()
    monkeypatch.setattr(H, "WORKER_SCRIPT", str(script))
    if fault in ("stick", "die"):
        warm_worker()
    return marker


def warm_worker():
    """Start a worker and wait until it is ready, so that a run with a short limit is not spent starting one (a
    worker's start counts against the run's limit; it took 0.25 s on a slow machine, most of a 0.3 s limit)."""
    from dpopt.backends import _highs_run as H
    worker = H._take_worker(30.0)
    assert worker is not None, "no HiGHS worker could be started"
    H._IDLE.append(worker)


def was_killed(marker) -> bool:
    """The faulty HiGHS ran in another process, which no longer runs (gone, or a zombie not yet reaped)."""
    import time

    pid = int(marker.read_text())
    assert pid != os.getpid()
    for _ in range(100):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False
