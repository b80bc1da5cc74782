#!/usr/bin/env python3
"""The INT8 gate of issue 11: wide-band PESQ of each reduced-precision engine against the FP32 engine.

Waveform SNR punishes harmless phase shifts in a vocoder; PESQ (ITU-T P.862.2, wide band, at
16 kHz) scores what a listener hears. Input: the folder written by
`talker engine validate --save-audio DIR` on the GPU host and brought back here, holding
`fp32/<n>.wav`, `fp16/<n>.wav`, `int8/<n>.wav` (16-bit mono at the voice's rate). Each file is
resampled to 16 kHz (polyphase, scipy) and scored with the `pesq` package against the FP32 file of
the same sentence. SNR is printed beside it as a report. DIR may instead hold `pq_<precision>.npz`
files (16 kHz int16, from scripts/gpu-audio-pack.py on the GPU host: small enough to come back).

  scripts/gpu-pesq.py DIR [--bench results.jsonl] [--min-pesq 4.0] [--share 0.95] [--speedup 1.2]

The gate: INT8 is offered when PESQ >= --min-pesq on at least --share of the sentences AND, when
--bench gives `talker engine bench` rows, INT8 is at least --speedup times FP16 at the renderer's
buckets. One JSON object on stdout; exit 0 either way (the verdict is in "int8_offered").
Needs numpy, scipy, pesq (`pip install numpy scipy pesq`).
"""
import argparse
import glob
import json
import os
import sys
from math import gcd

import numpy as np
from pesq import pesq
from scipy.io import wavfile
from scipy.signal import resample_poly

RATE = 16000


def load(path):
    rate, data = wavfile.read(path)
    if data.ndim != 1:
        sys.exit(f"{path}: {data.shape[1]} channels, expected mono")
    x = data.astype(np.float64) / 32768.0
    g = gcd(RATE, rate)
    return x, resample_poly(x, RATE // g, rate // g)


def snr_db(ref, x):
    n = min(len(ref), len(x))
    noise = np.sum((ref[:n] - x[:n]) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref[:n] ** 2) / noise))


def packed(folder, precision):
    """{name: 16 kHz float signal} from pq_<precision>.npz, or None when there is no such file."""
    path = os.path.join(folder, f"pq_{precision}.npz")
    if not os.path.exists(path):
        return None
    d = np.load(path)
    ends = np.cumsum(d["lengths"])
    pcm = d["pcm"].astype(np.float64) / 32768.0
    return {str(n): pcm[e - k:e] for n, e, k in zip(d["names"], ends, d["lengths"])}


def score_packed(ref, ours, precision):
    rows = []
    for name, r in sorted(ref.items()):
        if name not in ours:
            sys.exit(f"{precision} has no {name}: it must have every sentence fp32 has")
        x = ours[name]
        n = min(len(r), len(x))
        try:
            p = float(pesq(RATE, r[:n], x[:n], "wb"))
        except Exception as e:  # pesq refuses silent or too-short signals: count it as a failure
            p = float("nan")
            print(f"{precision}/{name}: pesq failed: {e}", file=sys.stderr)
        rows.append({"sentence": name, "pesq": p, "snr_db": snr_db(r, x)})
    return rows


def score(folder, precision):
    ref = packed(folder, "fp32")
    if ref is not None:
        ours = packed(folder, precision)
        if ours is None:
            sys.exit(f"no {folder}/pq_{precision}.npz")
        return score_packed(ref, ours, precision)
    rows = []
    for ref_path in sorted(glob.glob(os.path.join(folder, "fp32", "*.wav"))):
        name = os.path.basename(ref_path)
        path = os.path.join(folder, precision, name)
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: {precision} must have every sentence fp32 has")
        ref_raw, ref = load(ref_path)
        raw, x = load(path)
        n = min(len(ref), len(x))
        try:
            p = float(pesq(RATE, ref[:n], x[:n], "wb"))
        except Exception as e:  # pesq refuses silent or too-short signals: count it as a failure
            p = float("nan")
            print(f"{path}: pesq failed: {e}", file=sys.stderr)
        rows.append({"sentence": name, "pesq": p, "snr_db": snr_db(ref_raw, raw)})
    if not rows:
        sys.exit(f"no {folder}/fp32/*.wav")
    return rows


def summary(rows, min_pesq):
    p = np.array([r["pesq"] for r in rows])
    s = np.array([r["snr_db"] for r in rows])
    ok = np.nan_to_num(p, nan=-1.0) >= min_pesq
    return {"sentences": len(rows), "pesq_min": float(np.nanmin(p)), "pesq_median": float(np.nanmedian(p)),
            "pesq_p05": float(np.nanpercentile(p, 5)), "share_at_least_min": float(ok.mean()),
            "snr_db_min": float(s.min()), "snr_db_median": float(np.median(s)),
            "worst": sorted(rows, key=lambda r: np.nan_to_num(r["pesq"], nan=-1.0))[:5]}


def bucket_speed(bench_path, precision):
    """audio-seconds per second at the renderer's buckets (batch 64) for `precision` (fp16, int8),
    from the bench-talker step of gpu-check's results.jsonl (`talker engine bench` JSON)."""
    name = {"fp16": "F16", "int8": "I8", "fp32": "F32"}[precision]
    found = None
    for line in open(bench_path):
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue
        result = d.get("result") if isinstance(d, dict) else None
        for engine in (result or {}).get("bench", []) if d.get("step") == "bench-talker" else []:
            for row in engine.get("rows", []) if engine.get("precision") == name else []:
                if row.get("batch") == 64:
                    found = row["audio_seconds_per_second"]
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--bench", help="results.jsonl with talker engine bench rows (precision, batch)")
    ap.add_argument("--min-pesq", type=float, default=4.0)
    ap.add_argument("--share", type=float, default=0.95)
    ap.add_argument("--speedup", type=float, default=1.2)
    a = ap.parse_args()
    out = {"reference": "fp32 engine", "rate": RATE, "min_pesq": a.min_pesq, "share": a.share}
    for precision in ("fp16", "int8"):
        if os.path.isdir(os.path.join(a.folder, precision)) or \
                os.path.exists(os.path.join(a.folder, f"pq_{precision}.npz")):
            out[precision] = summary(score(a.folder, precision), a.min_pesq)
    if "int8" not in out:
        sys.exit(f"no {a.folder}/int8/ or {a.folder}/pq_int8.npz")
    quality = out["int8"]["share_at_least_min"] >= a.share
    out["int8_quality_pass"] = quality
    speed = None
    if a.bench:
        fp16, int8 = bucket_speed(a.bench, "fp16"), bucket_speed(a.bench, "int8")
        if fp16 and int8:
            speed = int8 / fp16
    out["int8_speedup_at_buckets"] = speed
    out["int8_offered"] = bool(quality and speed is not None and speed >= a.speedup)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
