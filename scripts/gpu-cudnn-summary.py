#!/usr/bin/env python3
"""The table of one `scripts/gpu-cudnn OUT` call: the cuDNN path's gates, then audio-seconds per
second for im2col + GEMM, cuDNN, cuDNN with CUDA graphs and PyTorch eager FP16 side by side, the
ratios against PyTorch and the issue's targets, and the slowest op kinds of the profile.

  python3 scripts/gpu-cudnn-summary.py OUT   (OUT holds the call's JSON files, or its raw.tar.xz)
"""
import json
import sys

from gpu_outputs import last_json, texts

TARGET_VS_TORCH = 1.0
TARGET_BUCKETS = 1500.0
TARGET_BATCH1 = 600.0


def load(out):
    return {name: last_json(text) for name, text in texts(out).items()}


def rates(bench, conv=None):
    """{batch: audio-s per s} of a talker bench, for one conv path's runs."""
    got = {}
    if not bench:
        return got
    for res in bench.get("bench", []):
        for row in res.get("rows", []):
            for run in row.get("runs", []):
                if conv is None or run.get("conv") == conv:
                    got[row["batch"]] = run["audio_seconds_per_second"]
    return got


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def profiles(both):
    for res in (both or {}).get("bench", []):
        for row in res.get("rows", []):
            for prof in row.get("profile", []):
                kinds = prof.get("kinds", [])
                total = sum(k["seconds"] for k in kinds) or 1.0
                print(f"== profile, batch {row['batch']}, conv {prof['conv']} (synced per step; "
                      f"{total:.2f} s)")
                for k in kinds[:8]:
                    wk = k["work"]
                    print(f"  {k['op']:<28} {k['steps']:>7} steps {k['seconds']:>7.3f} s "
                          f"{100 * k['seconds'] / total:>5.1f}%  {wk['achieved_tflops']:>7.2f} TFLOP/s "
                          f"{wk['achieved_tb_per_s']:>6.3f} TB/s")


def main():
    out = sys.argv[1]
    d = load(out)
    both = d.get("bench-conv-both")
    # The profile first: the reply of a device call keeps the end of the output, so the gates
    # and the throughput table come last.
    profiles(both)
    print("\n== gates (against ONNX Runtime CPU, 200 held-out sentences)")
    build = d.get("build") or {}
    print(f"engine header conv: {build.get('header', {}).get('conv', 'missing')}")
    for name in ["compare-fp16-graphs-off", "compare-fp16-graphs-on", "compare-fp32"]:
        c = d.get(name)
        if not c:
            print(f"{name}: not run or failed")
            continue
        print(f"{name}: durations {c['durations_identical']}/{c['sentences']}, SNR min "
              f"{c['snr_db_min']:.1f} dB, median {c['snr_db_median']:.1f} dB, pass {c['pass']}")
    gemm, cudnn = rates(both, "gemm"), rates(both, "cudnn")
    gemm = gemm or rates(d.get("bench-gemm"), "gemm")
    graphs = rates(d.get("bench-cudnn-graphs"), "cudnn")
    torch = {}
    for row in (d.get("torch-fp16") or {}).get("rows", []):
        torch[row["batch"]] = row["audio_seconds_per_second"]
    print("\n== audio-seconds per second (FP16; batch 64 = the renderer's buckets)")
    print(f"{'batch':>6} {'gemm':>7} {'cudnn':>7} {'cudnn+graphs':>13} {'torch fp16':>11} "
          f"{'cudnn/gemm':>11} {'best/torch':>11} {'targets':>8}")
    for b in sorted(set(gemm) | set(cudnn) | set(graphs) | set(torch)):
        best = max([v for v in (gemm.get(b), cudnn.get(b), graphs.get(b)) if v is not None], default=None)
        ratio = best / torch[b] if best and torch.get(b) else None
        speed = cudnn[b] / gemm[b] if cudnn.get(b) and gemm.get(b) else None
        floor = TARGET_BATCH1 if b == 1 else (TARGET_BUCKETS if b >= 64 else None)
        met = (ratio is not None and ratio >= TARGET_VS_TORCH) and (floor is None or (best or 0) >= floor)
        print(f"{b:>6} {fmt(gemm.get(b)):>7} {fmt(cudnn.get(b)):>7} {fmt(graphs.get(b)):>13} "
              f"{fmt(torch.get(b)):>11} {fmt(speed, '{:.2f}x'):>11} {fmt(ratio, '{:.2f}x'):>11} "
              f"{'met' if met else 'missed':>8}")
    print(f"targets: >= {TARGET_VS_TORCH}x PyTorch eager FP16 everywhere, >= {TARGET_BATCH1:.0f}x at "
          f"batch 1, >= {TARGET_BUCKETS:.0f}x at the buckets")


if __name__ == "__main__":
    main()
