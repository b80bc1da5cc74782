#!/usr/bin/env python3
"""The table of `scripts/gpu-render ab OUT DIR NAME...`: per build, the 10-minute render's wall
(the process's, as a user waits for it), cores busy, and from its debug log where the first and
last seconds went; then the book's real time and model seconds.

    scripts/gpu-ab-summary.py OUT
"""
import json
import re
import statistics
import sys
from pathlib import Path

LINE = re.compile(r"^\s*(\d+\.\d+)s\s+\w+\s+[\w:]+: (.*)$")


def timeline(log):
    """(uptime, message) of each debug line of a render's log."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if m:
            out.append((float(m.group(1)), m.group(2)))
    return out


def first(events, pattern):
    for t, msg in events:
        m = re.search(pattern, msg)
        if m:
            return t, m
    return None, None


def long_row(rec, log, result):
    """The render's figures; `wrote ...` is on stdout or, as a message for people, stderr."""
    ev = timeline(log)
    said = re.search(r"wrote .*? \(([\d.]+) s,", result.read_text(errors="replace") + log.read_text(errors="replace"))
    audio = float(said.group(1)) if said else float("nan")
    gpu_t, gpu = first(ev, r"GPU opened in ([\d.]+) s \((.*)\)")
    eng_t, eng = first(ev, r"engine loaded in ([\d.]+) s \((.*)\)")
    chunk_t, _ = first(ev, r"chunk started")
    asm_t, asm = first(ev, r"assembled ms=(\d+)")
    stop_t, stop = first(ev, r"speech lanes stopped in ([\d.]+) s")
    calls = [(t, m) for t, msg in ev for m in [re.search(r"model call in ([\d.]+) s items=(\d+)", msg)] if m]
    warms = [float(m.group(1)) for _, msg in ev for m in [re.search(r"warm-up call in ([\d.]+) s", msg)] if m]
    last_t = ev[-1][0] if ev else None
    row = {
        "audio_s": audio,
        "wall_s": rec["wall_s"],
        "x_real_time": round(audio / rec["wall_s"], 1),
        "cores_busy": rec["cores_busy"],
        "render_wall_s": int(asm.group(1)) / 1000 if asm else None,
        "gpu_open": f"{gpu_t - float(gpu.group(1)):.3f}+{gpu.group(1)} ({gpu.group(2)})" if gpu else None,
        "engine_load": f"{eng.group(1)} ({eng.group(2)})" if eng else None,
        "engine_ready_at": eng_t,
        "first_call": f"at {calls[0][0]:.3f}, {calls[0][1].group(1)} s, {calls[0][1].group(2)} items" if calls else None,
        "calls": len(calls),
        "first_chunk_at": chunk_t,
        "assembled_at": asm_t,
        "warm_calls_logged": len(warms),
        "warm_seconds": round(sum(warms), 3),
        "lanes_stop": f"at {stop_t:.3f}, {stop.group(1)} s" if stop else None,
        "after_last_line_s": round(rec["wall_s"] - last_t, 3) if last_t is not None else None,
    }
    return row


def main():
    out = Path(sys.argv[1])
    recs = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines() if l.strip()]
    print((out / "gpu.txt").read_text().strip())
    by_build = {}
    for rec in recs:
        m = re.match(r"long-(.+)-(\d+)$", rec["step"])
        if not m:
            continue
        prefix = out / "raw" / f"ab-{rec['step']}"
        row = long_row(rec, Path(f"{prefix}.err"), Path(f"{prefix}.out")) if rec["rc"] == 0 else {"rc": rec["rc"], "err": rec.get("stderr_tail")}
        by_build.setdefault(m.group(1), []).append(row)
        print(f"{rec['step']}: {json.dumps(row)}")
    names = list(by_build)
    for n in names:
        rows = [r for r in by_build[n] if "wall_s" in r]
        if rows:
            wall = statistics.median(r["wall_s"] for r in rows)
            print(f"long {n}: median wall {wall:.3f} s ({rows[0]['audio_s'] / wall:.1f}x real time), "
                  f"median cores busy {statistics.median(r['cores_busy'] for r in rows):.2f}")
    if len(names) > 1:
        base = statistics.median(r["wall_s"] for r in by_build[names[0]] if "wall_s" in r)
        for n in names[1:]:
            med = statistics.median(r["wall_s"] for r in by_build[n] if "wall_s" in r)
            print(f"long {n} against {names[0]}: {base / med:.3f}x (wall ratio of medians)")
    for rec in recs:
        if rec["step"].startswith("book-"):
            rep = rec.get("stdout_last") or {}
            speech = rep.get("speech") or {}
            print(f"{rec['step']}: rc {rec['rc']}, wall {rec['wall_s']} s, "
                  f"{(rep.get('audio_seconds') or 0) / rec['wall_s']:.1f}x real time, "
                  f"model {speech.get('model_seconds')} s, load {speech.get('load_seconds')} s, "
                  f"stages {json.dumps(rep.get('stage_seconds'))}")


main()
