#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The peer of predict_bench: PyTorch's model(x) under torch.no_grad() on the same machine, as JSON lines.

784-512-512-10 ReLU MLP, float32, batches of 1, 32 and 1024 rows. The method of predict_bench:
5 warm-up calls, a probe of 10 calls sizes the segments (about 50 ms each), then --repeats
segments; latency_us is the median over segments of a call's mean time, samples_per_s = batch /
latency. Each thread count runs in a child process with OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
MKL_NUM_THREADS set to it (torch.set_num_threads does not control every BLAS's pool).

    /usr/bin/python3 bench/torch_predict_peer.py [--threads 1,2] [--repeats 15] [--batches 1,32,1024]

Uses Debian's python3-torch (apt-get install -y python3-torch), i.e. /usr/bin/python3.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--batches", default="1,32,1024")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not a.child:
        for t in [int(t) for t in a.threads.split(",")]:
            env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
            args = [sys.executable, os.path.abspath(__file__), "--child", str(t)] + sys.argv[1:]
            print(subprocess.run(args, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout, end="",
                  flush=True)
        return
    torch.set_num_threads(a.child)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).eval()
    repeats, segment_s = (3, 0.005) if a.smoke else (a.repeats, 0.05)
    for batch in [int(b) for b in a.batches.split(",")]:
        x = torch.rand(batch, 784)
        with torch.no_grad():
            def call():
                model(x)
            for _ in range(5):
                call()
            t0 = time.perf_counter()
            for _ in range(10):
                call()
            probe = (time.perf_counter() - t0) / 10
            calls = max(1, int(segment_s / max(probe, 1e-9)))
            lat = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(calls):
                    call()
                lat.append((time.perf_counter() - t0) / calls)
        med, best = statistics.median(lat), min(lat)
        print(json.dumps({"bench": "predict_torch", "model": "784-512-512-10", "batch": batch,
                          "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "latency_us": round(med * 1e6, 2), "latency_us_best": round(best * 1e6, 2),
                          "samples_per_s": round(batch / med), "samples_per_s_best": round(batch / best),
                          "calls_per_segment": calls, "repeats": repeats, "cpu": cpu_model()}), flush=True)


if __name__ == "__main__":
    main()
