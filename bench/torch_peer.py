#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The peer of train_bench: the same training step in PyTorch, on the same machine, as JSON lines.

784-512-512-10 ReLU MLP, global batch 128, float32, softmax cross-entropy, SGD with lr 0.01 and
momentum 0.9; each step gathers its batch from a shuffled in-memory data set (as the Trainer does).
samples/s is the median over --repeats segments of --steps steps after 3 warm-up steps (the method
of train_bench). With several thread counts it also trains the same model from the same
initialisation for --check-steps steps per thread count and reports whether the trained weights
are bitwise identical across thread counts (PyTorch makes no such promise; ReproSGD does).

    /usr/bin/python3 bench/torch_peer.py [--threads 1,2] [--steps 20] [--repeats 7] [--check-steps 50]

Uses Debian's python3-torch (1.13), i.e. /usr/bin/python3, not a pyenv interpreter on PATH. Its
BLAS is whatever libblas.so.3 points to (update-alternatives; OpenBLAS here), whose thread pool
torch.set_num_threads does not control: each thread count therefore runs in a child process with
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to it as well.
"""
import argparse
import hashlib
import json
import os
import platform
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


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10))


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    centres = torch.randn(10, 784, generator=g)
    x = (0.2 * centres[y] + torch.randn(n, 784, generator=g)).contiguous()
    return x, y


def train(model, x, y, batch, steps, seed, clock=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    spe = x.shape[0] // batch
    order = None
    for s in range(steps):
        if s % spe == 0:
            order = torch.randperm(x.shape[0], generator=g)
        idx = order[(s % spe) * batch:(s % spe + 1) * batch]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        loss.item()  # the Trainer also reads the step's loss on the host every step
        if clock is not None:
            clock.append(time.perf_counter())


def fingerprint(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--check-steps", type=int, default=50)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    if not a.child:
        prints = {}
        for t in threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
            args = [sys.executable, os.path.abspath(__file__), "--child", str(t)] + sys.argv[1:]
            out = subprocess.run(args, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
            for line in out.splitlines():
                print(line, flush=True)
                rec = json.loads(line)
                prints[t] = next(v for k, v in rec.items() if k.startswith("fingerprint"))
        if len(prints) > 1:
            print(json.dumps({"bench": "train_torch_determinism", "threads": threads, "fingerprints": prints,
                              "weights_identical_across_thread_counts": len(set(prints.values())) == 1}), flush=True)
        return
    threads = [a.child]
    batch = 128
    steps, repeats, warmup = (2, 1, 1) if a.smoke else (a.steps, a.repeats, 3)
    x, y = make_data(batch * 50, 1)
    torch.set_num_interop_threads(1)
    prints = {}
    for t in threads:
        torch.set_num_threads(t)
        model = make_model(1)
        clock = []
        train(model, x, y, batch, warmup + steps * repeats, 2, clock)
        rates = sorted(steps * batch / (clock[warmup - 1 + (r + 1) * steps] - clock[warmup - 1 + r * steps])
                       for r in range(repeats))
        check = 2 if a.smoke else a.check_steps
        model = make_model(1)
        train(model, x, y, batch, check, 3)
        prints[t] = fingerprint(model)
        print(json.dumps({
            "bench": "train_torch", "model": "784-512-512-10", "batch": batch, "optimizer": "sgd-momentum",
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "samples_per_s": round(rates[len(rates) // 2], 1), "samples_per_s_best": round(rates[-1], 1),
            "repeats": repeats, "steps_per_repeat": steps, "fingerprint_after_%d_steps" % check: prints[t],
            "device": cpu_model(), "openblas_num_threads_env": os.environ.get("OPENBLAS_NUM_THREADS", "")}), flush=True)


if __name__ == "__main__":
    main()
