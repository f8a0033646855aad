#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ccache_launch.sh — the compiler launcher (CMAKE_CXX_COMPILER_LAUNCHER) that scripts/build.sh gives
# the g++ and clang++ builds when ccache is installed: `ccache_launch.sh COMPILER ARGS...`.
#
# Why a script and not ccache itself: ccache hashes the text `-march=native`, not the CPU it
# resolves to (ccache issue #824), and the machines this project is built on change CPU between
# sessions (AMD Zen 3 with AVX2, Zen 4/5 and Intel with AVX-512) while keeping $HOME/.cache: an
# object compiled for AVX-512 would be a cache hit on Zen 3 and die there of SIGILL. So every CPU
# (its model name and feature flags) gets a cache of its own. CCACHE_BASEDIR is the repository, so
# that two clones in different folders (a fresh clone's CI run after a session's build) share
# their objects: ccache rewrites the absolute paths under it to relative ones before hashing.
#
#   REPROSGD_CACHE      cache root (default ~/.cache/reprosgd); the objects go to ccache/<cpu key>
#   CCACHE_MAXSIZE      the limit per CPU (default 4G here)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cpu_key=$( { grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; } 2>/dev/null | cksum | cut -d' ' -f1)
export CCACHE_DIR="${REPROSGD_CACHE:-$HOME/.cache/reprosgd}/ccache/cpu-${cpu_key:-unknown}"
export CCACHE_BASEDIR="$root"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-4G}"
exec ccache "$@"
