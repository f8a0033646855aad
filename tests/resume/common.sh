# Shared by the resume tests: a configuration with dropout, shuffling and a cosine schedule with
# warm-up; 16 steps per epoch (1024 samples / batch 64), 40 steps in all.
loud=(--data synthetic --synthetic-train 1024 --synthetic-test 128 --layers 784,32,16,10 --dropout 0.2
      --schedule cosine --warmup 5 --batch 64 --micro-batch 16 --steps 40 --seed 9)
base=("${loud[@]}" --quiet)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
same() {  # same LABEL WANT GOT
  if [ "$2" = "$3" ] && [[ "$2" == fingerprint\ * ]]; then passes=$((passes + 1)); echo "ok   $1"; else fails=$((fails + 1)); echo "FAIL $1: want '$2', got '$3'"; fi
}
finish() { echo "$passes passed, $fails failed"; [ $fails -eq 0 ]; }
