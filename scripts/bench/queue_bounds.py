"""The service's promises on the default request, checked against a running build
(docs/BENCHMARKS.md, "The service under load"): images in flight, memory as the queue fills,
and priority.

  /usr/bin/python3 scripts/bench/queue_bounds.py [--bin ./bin/marspec] [--port 18090]

1. Memory: one POST of 256 images, the server's peak resident memory over 6 s (one batch in
   flight); then 60 such POSTs, the peak over 12 s, the running jobs and the mean engine batch
   (from /metrics). Every job is cancelled after.
2. Priority: a server with --max-batch 8; twenty 20-image jobs at priority 0, then one at 9:
   of the low jobs still queued when it was posted, how many started before it.
Each part starts its own server (--threads 1, a fresh data folder) on the embedded packs.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time
import urllib.request


def call(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
        return json.loads(raw) if raw and r.headers.get("Content-Type", "").startswith("application/json") else raw.decode()


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024


def serve(binary, port, *flags):
    data = tempfile.mkdtemp()
    p = subprocess.Popen([binary, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--threads", "1", *flags],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            call(base, "GET", "/healthz")
            return p, base
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not come up")


def peak(pid, seconds):
    top, end = 0.0, time.time() + seconds
    while time.time() < end:
        top = max(top, rss_mb(pid))
        time.sleep(0.1)
    return top


def batch_mean(base):
    text = call(base, "GET", "/metrics")
    get = lambda name: sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + " ") or l.startswith(name + "{"))
    n = get("marspec_batch_images_count")
    return get("marspec_batch_images_sum") / n if n else 0.0


def memory(binary, port):
    p, base = serve(binary, port, "--queue", "100")
    try:
        idle = rss_mb(p.pid)
        one = call(base, "POST", "/v1/generations", {"class": "sneaker", "n": 256})["id"]
        single = peak(p.pid, 6)
        call(base, "DELETE", f"/v1/generations/{one}")
        time.sleep(1)
        ids = [call(base, "POST", "/v1/generations", {"class": "sneaker", "n": 256})["id"] for _ in range(60)]
        many = peak(p.pid, 12)
        running = call(base, "GET", "/v1/generations?status=running&limit=100")["total"]
        mean = batch_mean(base)
        for i in ids:
            call(base, "DELETE", f"/v1/generations/{i}")
        print(f"memory: idle {idle:.0f} MB; one 256-image job {single:.0f} MB; 60 of them {many:.0f} MB "
              f"({many / single:.2f}x one job's); jobs running {running} of 60; mean engine batch {mean:.1f} images")
    finally:
        p.terminate()
        p.wait()


def priority(binary, port):
    p, base = serve(binary, port, "--max-batch", "8", "--queue", "100")
    try:
        low = [call(base, "POST", "/v1/generations", {"class": "sneaker", "n": 20, "priority": 0})["id"] for _ in range(20)]
        high = call(base, "POST", "/v1/generations", {"class": "sneaker", "n": 20, "priority": 9})["id"]
        jobs = {}
        while True:
            jobs = {i: call(base, "GET", f"/v1/generations/{i}") for i in low + [high]}
            if all(j["status"] in ("succeeded", "failed", "cancelled") for j in jobs.values()):
                break
            time.sleep(0.5)
        h = jobs[high]
        waiting = [j for i, j in jobs.items() if i != high and (j.get("started") or "9") >= h["created"]]
        passed = [j for j in waiting if j["started"] < h["started"]]
        print(f"priority: {len(waiting)} low jobs still queued when the priority-9 job was posted; "
              f"{len(passed)} of them started before it (--max-batch 8)")
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="./bin/marspec")
    ap.add_argument("--port", type=int, default=18090)
    a = ap.parse_args()
    memory(a.bin, a.port)
    priority(a.bin, a.port + 1)
