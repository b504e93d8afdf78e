"""gpu_mar.py's cache stage on a device where the cache kept on the device fails: that row and
the next run again with MARSPEC_CACHE_ON_DEVICE=off, recorded and named in the report; any
other failure turns nothing off. The marspec commands are stand-ins that fail as a device would.

  /usr/bin/python3 test_gpu_cache_on_device.py OUT
"""
import json
import os
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import gpu_mar  # noqa: E402
import gpu_mar_report  # noqa: E402

CACHE_FAILURE = ("marspec bench --parts failed (1): cache kept on the device (MARSPEC_CACHE_ON_DEVICE=off keeps it in "
                 "host memory instead): binding input enc_kv: CUDA failure 700")
ROW = json.dumps({"images_per_second": 1.0})


def new_run(out):
    args = types.SimpleNamespace(out=out, deadline=time.time() + 300, python=sys.executable, pack=out, steps=100, official=None,
                                 batches=[1, 8, 64], num_iter=64, cfg=2.9, device="cuda")
    run = gpu_mar.Run(args)
    run.report = lambda: None  # the report wants the whole run's arguments
    run.stage, run.stage_end = ("cache", 50), time.time() + 50
    return run


def main(out):
    run = new_run(os.path.join(out, "fails"))
    calls = []

    def device_cache_fails(argv, env=None):
        calls.append((argv[argv.index("--batch") + 1], env.get("MARSPEC_CACHE_ON_DEVICE")))
        if env.get("MARSPEC_CACHE_ON_DEVICE") != "off":
            raise RuntimeError(CACHE_FAILURE)
        return ROW
    run.marspec = device_cache_fails
    run.stage_cache()
    assert calls == [("8", "on"), ("8", "off"), ("64", "off")], calls
    key = f"marspec/{run.fast()}/graph+cache/b8"
    assert "stats" in run.results[key] and run.results[key]["env"]["MARSPEC_CACHE_ON_DEVICE"] == "off", run.results[key]
    assert "CUDA failure 700" in run.results["cache/kv-in-host-memory"]["error"]
    lines = gpu_mar_report.stage_lines(run)
    assert any("MARSPEC_CACHE_ON_DEVICE=off" in line and "CUDA failure 700" in line for line in lines), lines

    run = new_run(os.path.join(out, "other"))
    calls.clear()

    def out_of_memory(argv, env=None):
        calls.append((argv[argv.index("--batch") + 1], env.get("MARSPEC_CACHE_ON_DEVICE")))
        raise RuntimeError("marspec bench --parts failed (1): CUDA failure 2: out of memory")
    run.marspec = out_of_memory
    run.stage_cache()
    assert calls == [("8", "on"), ("64", "on")], calls
    assert "cache/kv-in-host-memory" not in run.results
    print("ok: a failure of the cache on the device moves the cache rows to host memory, recorded and reported; "
          "another failure turns nothing off")


if __name__ == "__main__":
    main(sys.argv[1])
