"""gpu_mar.py's preflight on a device where a pass that hands back only the picked rows fails:
every later marspec command runs with MARSPEC_PICK_ROWS=off, recorded and named in the report;
any other failure turns nothing off and stands in every marspec row. The marspec commands are
stand-ins that fail as a device would.

  /usr/bin/python3 test_gpu_pick_rows.py OUT
"""
import os
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import gpu_mar  # noqa: E402
import gpu_mar_report  # noqa: E402

PICK_FAILURE = ("marspec generate --model failed (1): transformer pass handing back only the picked rows "
                "(MARSPEC_PICK_ROWS=off hands back every row instead): binding output z: CUDA failure 700")


def new_run(out):
    args = types.SimpleNamespace(out=out, deadline=time.time() + 300, python=sys.executable, pack=out, steps=100, official=None)
    run = gpu_mar.Run(args)
    run.report = lambda: None  # the report wants the whole run's arguments
    return run


def main(out):
    os.environ.pop("MARSPEC_PICK_ROWS", None)
    run = new_run(os.path.join(out, "other"))
    calls = []

    def out_of_memory(argv, env=None):
        calls.append(os.environ.get("MARSPEC_PICK_ROWS"))
        raise RuntimeError("marspec generate --model failed (1): CUDA failure 2: out of memory")
    run.marspec = out_of_memory
    run.preflight()
    assert calls == [None], calls
    assert run.marspec_reason and "out of memory" in run.marspec_reason, run.marspec_reason
    assert "preflight/pick-rows-off" not in run.results and "MARSPEC_PICK_ROWS" not in os.environ

    run = new_run(os.path.join(out, "pick"))
    calls.clear()

    def pick_fails(argv, env=None):
        calls.append(os.environ.get("MARSPEC_PICK_ROWS"))
        if os.environ.get("MARSPEC_PICK_ROWS") != "off":
            raise RuntimeError(PICK_FAILURE)
        return ""
    run.marspec = pick_fails
    run.preflight()
    assert calls == [None, "off"], calls
    assert not run.marspec_reason, run.marspec_reason
    assert os.environ.get("MARSPEC_PICK_ROWS") == "off"
    assert "CUDA failure 700" in run.results["preflight/pick-rows-off"]["error"]
    lines = gpu_mar_report.stage_lines(run)
    assert any("MARSPEC_PICK_ROWS=off" in line and "CUDA failure 700" in line for line in lines), lines

    run = new_run(os.path.join(out, "again"))  # already off: a second failure is the device's word
    calls.clear()

    def still_fails(argv, env=None):
        calls.append(os.environ.get("MARSPEC_PICK_ROWS"))
        raise RuntimeError(PICK_FAILURE)
    run.marspec = still_fails
    run.preflight()
    assert calls == ["off"], calls
    assert run.marspec_reason, "no reason given for the marspec rows"
    print("ok: a picking failure turns picking off once, recorded and reported; another failure turns nothing off")


if __name__ == "__main__":
    main(sys.argv[1])
