#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# device_build_complete.sh NAME BUILD FOREIGN MARKER "APP..." UNIT_TEST... — a device variant build
# (CUDA or HIP, compiled and linked only: scripts/build.sh --variants) made what it must: the
# programs APP (paths under BUILD) and the unit tests UNIT_TEST (under BUILD/tests, each with its
# kernels instantiated for the device space: tests/support/exec_spaces.hpp), each unit test holding
# device code when MARKER (a string of the device's offload bundle) is given; and no object took a
# header from another toolkit installed under FOREIGN (the pinned toolkit rules that out).
set -uo pipefail
name=$1 build=$2 foreign=$3 marker=$4 apps=$5
shift 5
missing=() no_device=()
for f in $apps; do [ -x "$build/$f" ] || missing+=("$f"); done
for t in "$@"; do
  if [ ! -x "$build/tests/$t" ]; then
    missing+=("tests/$t")
  elif [ -n "$marker" ] && ! grep -aq -- "$marker" "$build/tests/$t"; then
    no_device+=("tests/$t")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: the $name build lacks ${missing[*]}"
  exit 1
fi
if [ ${#no_device[@]} -gt 0 ]; then
  echo "FAIL: no device code ($marker) in ${no_device[*]}"
  exit 1
fi
deps=$(find "$build" -name '*.o.d' | wc -l)
leaks=$(find "$build" -name '*.o.d' -print0 | xargs -0 grep -l -- "$foreign" 2>/dev/null)
if [ -n "$leaks" ]; then
  echo "FAIL: objects that include headers from $foreign (another toolkit):"
  echo "$leaks" | head -n 5
  exit 1
fi
echo "$name build complete: ${apps:+$apps and }$# unit tests ($*)${marker:+, each with device code}; $deps objects, none with a header from $foreign"
