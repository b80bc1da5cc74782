#!/usr/bin/env python3
"""Summarises a `scripts/gpu-render run OUT` folder: one line per step, then the CUDA/CPU ratios.

Usage: scripts/gpu-render-summary.py OUT
Reads OUT/results.jsonl (one record per timed command, written by gpu-render's `measure`) and the
nvidia-smi samples OUT/raw/gpu-util-*.csv.
"""
import csv
import json
import os
import sys


def gpu_util(path):
    """Mean utilisation and the share of samples with the GPU busy, from nvidia-smi's CSV."""
    try:
        rows = [r for r in csv.reader(open(path)) if len(r) >= 3]
    except OSError:
        return None
    vals = []
    for r in rows:
        try:
            vals.append(float(r[1]))
        except ValueError:
            continue
    if not vals:
        return None
    return {"samples": len(vals), "mean_util_pct": round(sum(vals) / len(vals), 1),
            "busy_share": round(sum(1 for v in vals if v > 0) / len(vals), 3),
            "max_mem_mib": max(float(r[2]) for r in rows if r[2].strip().replace(".", "").isdigit())}


def audio_seconds(result):
    """Seconds of video a step produced: a render report's, or the sum over a batch's jobs."""
    if not isinstance(result, dict):
        return None
    if "audio_seconds" in result:
        return result["audio_seconds"]
    total = 0.0
    found = False
    for key in ("jobs", "results", "reports"):
        for job in result.get(key, []) or []:
            report = job.get("result", job.get("report", job)) if isinstance(job, dict) else None
            if isinstance(report, dict) and "audio_seconds" in report:
                total += report["audio_seconds"]
                found = True
    return total if found else None


def batch_speech(result, wall):
    """A batch's speech figures: the process-wide batcher's counters when the result has them,
    else the sum over its jobs' reports (each job counts the model calls its items rode in)."""
    if not isinstance(result, dict) or "jobs" not in result:
        return None
    for key in ("batcher", "speech_batcher"):
        if isinstance(result.get(key), dict):
            b = dict(result[key])
            if "model_seconds" in b and wall:
                b["speech_share_of_wall"] = round(b["model_seconds"] / wall, 3)
            return b
    reports = [j.get("result") for j in result["jobs"] if isinstance(j.get("result"), dict)]
    model = sum(r.get("speech", {}).get("model_seconds", 0.0) for r in reports)
    items = sum(r.get("speech", {}).get("synthesized", 0) for r in reports)
    return {"jobs": len(reports), "items": items, "sum_job_model_seconds": round(model, 3),
            "speech_share_of_wall (sum over jobs)": round(model / wall, 3) if wall else None}


def main():
    out = sys.argv[1]
    steps = {}
    for line in open(os.path.join(out, "results.jsonl")):
        rec = json.loads(line)
        steps[rec["step"]] = rec
    print(open(os.path.join(out, "gpu.txt")).read().strip())
    for name, rec in steps.items():
        res = rec.get("stdout_last")
        audio = audio_seconds(res)
        speech = res.get("speech") if isinstance(res, dict) else None
        line = (f"{name:14s} rc {rec['rc']}  wall {rec['wall_s']:8.2f} s  cores busy {rec['cores_busy']:5.2f}"
                f"  peak RSS {rec['max_rss_mb']:7.1f} MB")
        if audio:
            line += f"  audio {audio:8.1f} s  {audio / rec['wall_s']:6.1f}x real time"
            line += f"  ({audio / rec['wall_s']:.1f} video-hours per wall-hour)"
        if isinstance(speech, dict):
            line += "  speech " + json.dumps({k: speech[k] for k in sorted(speech)
                                              if not isinstance(speech[k], (list, dict))})
        bs = batch_speech(res, rec["wall_s"])
        if bs:
            line += "  batch speech " + json.dumps(bs)
        spans = res.get("stage_spans") if isinstance(res, dict) else None
        if isinstance(spans, dict) and spans.get("frames"):
            # Issue 19: when the first chunk started drawing (the speech before it, the engine's
            # load included, is what it waited for).
            line += f"  first chunk at {spans['frames'][0]:.2f} s"
        if isinstance(res, dict) and isinstance(res.get("stage_seconds"), dict):
            line += "  stages " + json.dumps({k: round(v, 2) for k, v in res["stage_seconds"].items() if v})
        for key in ("backend", "gpu", "precision"):
            if isinstance(res, dict) and key in res:
                line += f"  {key}={res[key]}"
        print(line)
        if rec["rc"] != 0 and rec.get("stderr_tail"):
            print("   stderr: " + rec["stderr_tail"].strip().replace("\n", "\n   "))
    for kind in ("batch", "long"):
        for b in ("cuda", "cpu"):
            u = gpu_util(os.path.join(out, "raw", f"gpu-util-{kind}-{b}.csv"))
            if u:
                print(f"gpu during {kind}-{b}: {json.dumps(u)}")
    for kind in ("example", "batch", "long", "book"):
        c, p = steps.get(f"{kind}-cuda"), steps.get(f"{kind}-cpu")
        if c and p and c["rc"] == 0 and p["rc"] == 0:
            print(f"{kind}: cuda is {p['wall_s'] / c['wall_s']:.2f}x the cpu backend's speed (wall ratio)")
    # Issue 19's targets: (step, least real-time factor, least cores busy).
    for step, least, cores in (("book-cuda", 300, None), ("book-cpu", 80, None), ("long-cuda", 100, 13),
                               ("batch-cuda", 110, None)):
        rec = steps.get(step)
        audio = audio_seconds(rec.get("stdout_last")) if rec else None
        if not rec or rec["rc"] != 0 or not audio:
            print(f"target {step}: not measured")
            continue
        x = audio / rec["wall_s"]
        ok = x >= least and (cores is None or rec["cores_busy"] >= cores)
        more = f", cores busy {rec['cores_busy']} (want >= {cores})" if cores else ""
        print(f"target {step}: {x:.1f}x real time (want >= {least}){more}: {'met' if ok else 'MISSED'}")


main()
