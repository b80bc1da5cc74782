#!/usr/bin/env python3
"""Chunk workers over time in a render's debug log (`RUST_LOG=talker=debug`, each line's uptime).

    scripts/chunk-timeline.py LOG...

For each log: when the first chunk started and the last finished, the worker-seconds spent in
chunks, the mean number of chunks in flight over that span, the last moment all of the most
workers seen were busy and the tail after it; then the milliseconds per frame of the chunks
(over 80 frames) grouped by how many chunks were in flight while each ran (0-3, 4-7, ...).
"""
import re
import sys

LINE = re.compile(r"\s*([\d.]+)s .*chunk (started|finished) chunk=(\d+)(?: frames=(\d+))?")


def events(path):
    started, finished, frames, ev = {}, {}, {}, []
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        t, kind, c = float(m.group(1)), m.group(2), int(m.group(3))
        if kind == "started":
            started[c], frames[c] = t, int(m.group(4))
        else:
            finished[c] = t
        ev.append((t, 1 if kind == "started" else -1))
    ev.sort()
    return started, finished, frames, ev


def mean_busy(ev, a, b):
    busy, area, last = 0, 0.0, a
    for t, d in ev:
        if t <= a:
            busy += d
            continue
        if t >= b:
            break
        area += busy * (t - last)
        last, busy = t, busy + d
    return (area + busy * (b - last)) / (b - a)


for path in sys.argv[1:]:
    started, finished, frames, ev = events(path)
    busy, area, last, timeline = 0, 0.0, None, []
    for t, d in ev:
        if last is not None:
            area += busy * (t - last)
        busy, last = busy + d, t
        timeline.append((t, busy))
    first, end = ev[0][0], ev[-1][0]
    most = max(b for _, b in timeline)
    full = max(t for t, b in timeline if b == most)
    print(f"{path}: first start {first:.2f} s, last finish {end:.2f} s, worker-s {area:.1f}, "
          f"mean in flight {area / (end - first):.2f}, last time {most} busy {full:.2f} s, "
          f"tail {end - full:.2f} s")
    groups = {}
    for c, t in started.items():
        if c in finished and frames[c] > 80:
            k = int(mean_busy(ev, t, finished[c]) // 4) * 4
            groups.setdefault(k, []).append((finished[c] - t) / frames[c] * 1000)
    print("  ms per frame by chunks in flight: " + ", ".join(
        f"{k}-{k + 3}: {sum(v) / len(v):.2f} ({len(v)} chunks)" for k, v in sorted(groups.items())))
