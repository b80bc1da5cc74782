#!/usr/bin/env python3
"""Throughput rows of `talker engine bench` JSON files (as scripts/gpu-graphs writes them): one line
per configuration and batch size, audio-seconds per second.

  python3 scripts/gpu-graphs-summary.py BENCH.json...
"""
import json
import os
import sys


def rows(path):
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [ln for ln in fh.read().splitlines() if ln.strip()]
        doc = json.loads(lines[-1])
    except (OSError, ValueError, IndexError) as e:
        print(f"{path}: unreadable ({e})")
        return
    for res in doc.get("bench", []):
        tag = " ".join(f"{k}={v}" for k, v in res.items() if k in ("graphs", "precision"))
        for row in res.get("rows", []):
            runs = ", ".join(f"graphs {r.get('graphs')} {r.get('audio_seconds_per_second', 0):.0f}"
                             for r in row.get("runs") or [])
            print(f"{os.path.basename(path)} {tag} batch {row.get('batch')}: "
                  f"{row.get('audio_seconds_per_second', 0):.0f} audio-s/s "
                  f"(graphs_speedup {row.get('graphs_speedup')}; {runs})")


for p in sys.argv[1:]:
    rows(p)
