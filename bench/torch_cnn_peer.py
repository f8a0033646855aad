#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The peer of cnn_bench: the same CNN training in PyTorch, on the same machine, as JSON lines.

conv(32, 3x3, pad 1) relu maxpool(2) conv(64, 3x3, pad 1) relu maxpool(2) flatten linear(128) relu
dropout(0.3) linear(10) on
1x28x28 images (NCHW, PyTorch's layout), batch 128, float32, softmax cross-entropy, Adam 1e-3; each
step gathers its batch from a shuffled in-memory set of 6,400 images, and reads the loss on the
host (as the Trainer does). samples/s: the median (and best) of --repeats segments of --steps
steps after 3 warm-up steps (cnn_bench's method). Debian's python3-torch 1.13 (convolutions in
oneDNN); each thread count runs in a child process with OMP_NUM_THREADS and OPENBLAS_NUM_THREADS
set to it as well (bench/torch_peer.py says why).

    /usr/bin/python3 bench/torch_cnn_peer.py [--threads 1] [--steps 10] [--repeats 7]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(), torch.nn.Dropout(0.3),
        torch.nn.Linear(128, 10))


def run_one(threads, steps, repeats):
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    n, batch, warmup = 6400, 128, 3
    y = torch.randint(0, 10, (n,), generator=g)
    x = (0.2 * torch.randn(10, 1, 28, 28, generator=g)[y] + torch.randn(n, 1, 28, 28, generator=g)).contiguous()
    model = make_model(1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    spe = n // batch
    order = None
    clock = []
    for s in range(warmup + steps * repeats):
        if s % spe == 0:
            order = torch.randperm(n, generator=g)
        idx = order[(s % spe) * batch:(s % spe + 1) * batch]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        loss.item()
        clock.append(time.perf_counter())
    rates = []
    for r in range(repeats):
        t0, t1 = clock[warmup - 1 + r * steps], clock[warmup - 1 + (r + 1) * steps]
        rates.append(steps * batch / (t1 - t0))
    rates_sorted = sorted(rates)
    print(json.dumps({"bench": "train_cnn_torch", "threads": threads, "torch": torch.__version__,
                      "samples_per_s": round(rates_sorted[len(rates) // 2], 1),
                      "samples_per_s_best": round(max(rates), 1), "repeats": repeats, "steps_per_repeat": steps,
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}))
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", default="1")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--child", type=int, default=0)
    a = p.parse_args()
    if a.child:
        run_one(a.child, a.steps, a.repeats)
        return
    for t in [int(v) for v in a.threads.split(",")]:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t))
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
        subprocess.run([sys.executable, __file__, "--child", str(t), "--steps", str(a.steps),
                        "--repeats", str(a.repeats)], env=env, check=True)


if __name__ == "__main__":
    main()
