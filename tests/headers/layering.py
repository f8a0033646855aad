#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""layering.py [INCLUDE_DIR] — every #include in include/reprosgd points down the layer stack.

Reads every `#include <reprosgd/...>` (and `#include "..."`) in every header under INCLUDE_DIR
(default: the include/ folder next to tests/) and fails, naming the file, the line and both
layers, when a header includes a header of a higher layer. Includes within one layer (the same
folder, or the folders a layer groups) are fine. A header that no layer claims is an error too,
so a new folder has to take its place in LAYERS below. docs/architecture.md explains the stack.
Exit status: 0 clean, 1 violations (or unclaimed headers), 2 usage.
"""
import os
import re
import sys

# The layers from the bottom up: (name, path prefixes under reprosgd/, why it sits there).
# A prefix ending in '/' claims a folder, any other claims one file; the longest prefix wins.
LAYERS = [
    ("core", ["version.hpp", "config.hpp", "error.hpp", "fwd.hpp", "fingerprint.hpp", "detail/"],
     "the namespace, the build's configuration, the error types and the fingerprint: everything else needs them"),
    ("math", ["math/"],
     "the correctly rounded elementary functions and the FP environment check: pure numerics"),
    ("rng", ["rng/"],
     "counter-based Philox streams and the distributions over them: need only math"),
    ("kernels", ["kernels/", "detail/kernels/"],
     "the owner-computes GEMM, elementwise and loss kernels on Views: need core and math only"),
    ("concepts", ["concepts/"],
     "what a layer, optimizer, RNG stream, parallelism, reduction, fault policy or checkpoint format is; "
     "names the View and stream vocabulary types of kernels/ and rng/"),
    ("reduction", ["reduction/"],
     "the exact (int64 block) and native sums: arithmetic over the exchange concept, no parallelism type"),
    ("nn", ["nn/"],
     "Dense, activations, dropout, Sequential: layers built on kernels, rng and the local exact sum"),
    ("parallel", ["parallel/"],
     "Serial, DataParallel, Hybrid, the ULFM variants and process grids: transport and the reduction they run"),
    ("fault", ["fault/"],
     "fault policies, buddy copies and failure injection: wrap or extend a parallelism policy"),
    ("checkpoint", ["checkpoint/"],
     "atomic files, formats, snapshots and the manager: serialisation only (sits low by its includes)"),
    ("data", ["data/"],
     "data sets, readers, the synthetic set and the keyed permutation: need core and rng only"),
    ("optim", ["optim/"],
     "SGD, Adam and schedules: the Optimizer concept over flat parameter Views"),
    ("trainer", ["trainer/", "trainer.hpp"],
     "the Trainer and its parts: compose everything below into fit/evaluate/save/resume"),
    ("inference", ["inference/"],
     "Inference, normalisation, model files: a trained model's forward pass and its files, built on nn, "
     "checkpoint, data and the trainer's checkpoint payload (to extract a model from a checkpoint)"),
    ("testing", ["testing/"],
     "doctest helpers for users' determinism tests: may use anything, nothing uses them"),
    ("umbrella", ["reprosgd.hpp"],
     "the umbrella header: includes the serial user's whole API"),
]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(rel):
    """(index, name) of the layer of a path relative to include/reprosgd, or None."""
    best = None
    for i, (name, prefixes, _why) in enumerate(LAYERS):
        for p in prefixes:
            hit = rel.startswith(p) if p.endswith("/") else rel == p
            if hit and (best is None or len(p) > best[0]):
                best = (len(p), i, name)
    return None if best is None else (best[1], best[2])


def main(argv):
    if len(argv) > 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    include_dir = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "..", "..", "include")
    root = os.path.join(os.path.abspath(include_dir), "reprosgd")
    if not os.path.isdir(root):
        print(f"layering: error: {root} is not a folder", file=sys.stderr)
        return 2
    problems, headers, includes = [], 0, 0
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith((".hpp", ".h", ".ipp")):  # .ipp: a body included once per instruction set
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            headers += 1
            own = layer_of(rel)
            if own is None:
                problems.append(f"include/reprosgd/{rel}: in no layer (add its folder to LAYERS in {__file__})")
                continue
            with open(path, encoding="utf-8") as text:
                for number, line in enumerate(text, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    target = m.group(2)
                    if m.group(1) == '"':  # a quoted include: relative to the including file
                        target = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(path), target)),
                                                 os.path.dirname(root)).replace(os.sep, "/")
                    if not target.startswith("reprosgd/"):
                        continue  # Kokkos, MPI, the standard library, ...
                    includes += 1
                    other = layer_of(target[len("reprosgd/"):])
                    if other is None:
                        problems.append(f"include/reprosgd/{rel}:{number}: {line.strip()}: {target} is in no layer")
                    elif other[0] > own[0]:
                        problems.append(f"include/reprosgd/{rel}:{number}: {line.strip()}: "
                                        f"layer {own[1]} includes the higher layer {other[1]}")
    for p in problems:
        print(p)
    if problems:
        order = " < ".join(name for name, _p, _w in LAYERS)
        print(f"layering: {len(problems)} problem(s) in {headers} headers ({includes} reprosgd includes); "
              f"the layers, from the bottom: {order}")
        return 1
    print(f"layering: {headers} headers, {includes} reprosgd includes, every one pointing down or sideways")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
