#!/usr/bin/env bash
# Alternating A/B of the audio-only pass 2 for WAV and MP3 outputs (ACX levelling by default),
# warm phrase cache filled by A first. Usage: fmt-ab.sh A B BOOK OUT PAIRS
set -euo pipefail
a=$1; b=$2; book=$3; out=$4; pairs=$5
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
args=(render --json --deterministic --backend cpu --cache "$work/cache" "$book")
"$a" "${args[@]}" -o "$work/warm.wav" >/dev/null 2>&1
echo "a $a ($(sha256sum "$a" | cut -c1-12)), b $b ($(sha256sum "$b" | cut -c1-12)), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/summary.txt"
for ((r = 1; r <= pairs; r++)); do
  for ext in wav mp3; do
    for l in a b; do
      bin=$a; [[ $l == b ]] && bin=$b
      "$bin" "${args[@]}" -o "$work/$l-$r.$ext" >"$out/$l-$r-$ext.json" 2>/dev/null
      echo "$l-$r.$ext sha256 $(sha256sum "$work/$l-$r.$ext" | cut -c1-16)" >>"$out/summary.txt"
    done
  done
done
python3 - "$out" "$pairs" >>"$out/summary.txt" <<'PY'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
for ext in ("wav", "mp3"):
    m = {}
    for l in ("a", "b"):
        reps = [json.load(open(f"{out}/{l}-{r}-{ext}.json")) for r in range(1, pairs + 1)]
        assert all(x["phrase_hits"] == x["utterances"] for x in reps)
        asm = [x["stage_seconds"]["assemble"] for x in reps]
        m[l] = statistics.median(asm)
        print(f"{ext} {l}: assemble " + " ".join(f"{v:.2f}" for v in asm) + f" s, median {m[l]:.2f} s; wall median {statistics.median(x['wall_seconds'] for x in reps):.2f} s; cores busy median {statistics.median(x['cores_busy_mean'] for x in reps):.2f}")
    print(f"{ext}: assemble b/a {m['b'] / m['a']:.2f}x")
PY
cat "$out/summary.txt"
