#!/usr/bin/env bash
# build_installed.sh SRC BIN [CMAKE OPTIONS...] — configure the project SRC (examples/) in BIN with
# the options given (the installed package's prefix among them) and build all of it, as a user
# would. Quiet on success; on failure prints the failing step's log tail and exits 1.
set -uo pipefail
src=$1 bin=$2; shift 2
mkdir -p "$bin"
step() {  # name, then the command
  local name=$1; shift
  if ! "$@" > "$bin/$name.log" 2>&1; then
    echo "FAIL $name: $*"; tail -n 40 "$bin/$name.log"; exit 1
  fi
}
step configure cmake -S "$src" -B "$bin" "$@"
step build cmake --build "$bin" --parallel "${REPROSGD_JOBS:-2}"
echo "built $(find "$bin/examples" -maxdepth 1 -type f -perm -u+x | wc -l) examples in $bin/examples against the installed package"
