#!/usr/bin/env python3
"""The baselines that talker's GPU engines are judged against, run on the GPU machine.

Input: a Piper voice (.onnx) and the ids JSON written by `talker engine ids` (its first
`calibration` sentences calibrate INT8; the rest are held out). Output: one JSON object on stdout.

  reference  ONNX Runtime (CPU) on every held-out sentence, batch 1, noise off: audio and
             per-id duration frames, written in the binary layout of `talker engine validate --out`
             (per sentence: u32 samples, f32 audio, u32 ids, u32 frames per id).
  compare    one `validate --out` file (or, with --prefix, its first sentences) against the reference: durations identical?, SNR per
             sentence, NaN/Inf count; exits 1 when a gate (--min-snr, durations, non-finite) fails.
  bench-ort  ONNX Runtime CPU throughput (audio-seconds per second) at each batch size.
  bench-ort-cuda
             ONNX Runtime's CUDA execution provider (e.g. the onnxruntime-gpu wheel on PYTHONPATH)
             at each batch size, with cudnn_conv_algo_search at its default (EXHAUSTIVE) and at
             DEFAULT; with --ref, also durations and SNR against the CPU reference. (PyTorch eager
             is scripts/gpu-baseline-torch.py, Piper's own module.)

Batches are formed exactly as talker forms them (`tts::batch::plan` with its default bucket
edges): sorted by (bucket, length), a batch never spans two buckets, at most N items.
Needs numpy, onnx, onnxruntime (onnxruntime-gpu for bench-ort-cuda).
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

EDGES = [48, 96, 144, 208, 288, 400, 560]
HOP = 256


def held_out(path):
    with open(path) as f:
        d = json.load(f)
    return [s["ids"] for s in d["sentences"][d["calibration"]:]]


def batches(lengths, max_items):
    """Same grouping as talker's tts::batch::plan with no token budget."""
    def bucket(n):
        return next((k for k, e in enumerate(EDGES) if n <= e), len(EDGES))
    order = sorted(range(len(lengths)), key=lambda i: (bucket(lengths[i]), lengths[i], i))
    out, cur = [], []
    for i in order:
        if cur and (len(cur) >= max_items or bucket(lengths[cur[0]]) != bucket(lengths[i])):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


def feed(batch):
    longest = max(len(b) for b in batch)
    ids = np.zeros((len(batch), longest), dtype=np.int64)
    for r, b in enumerate(batch):
        ids[r, : len(b)] = b
    lengths = np.array([len(b) for b in batch], dtype=np.int64)
    return ids, lengths, np.array([0.0, 1.0, 0.0], dtype=np.float32)


def with_durations(model_path):
    """The voice with the per-id duration frames and per-item frame counts as extra outputs."""
    import onnx
    m = onnx.load(model_path)
    names = {o for n in m.graph.node for o in n.output}
    for src, dst, elem in [("/Ceil_output_0", "durations", onnx.TensorProto.FLOAT),
                           ("/Cast_output_0", "frames", onnx.TensorProto.INT64)]:
        if src not in names:
            sys.exit(f"{model_path}: no {src} (not a Piper VITS graph?)")
        m.graph.node.append(onnx.helper.make_node("Identity", [src], [dst]))
        m.graph.output.append(onnx.helper.make_tensor_value_info(dst, elem, None))
    return m.SerializeToString()


def ort_session(model_bytes, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, sess_options=so, providers=["CPUExecutionProvider"])


def write_items(path, items):
    with open(path, "wb") as f:
        for pcm, frames in items:
            f.write(struct.pack("<I", len(pcm)))
            f.write(np.asarray(pcm, dtype="<f4").tobytes())
            f.write(struct.pack("<I", len(frames)))
            f.write(np.asarray(frames, dtype="<u4").tobytes())


def read_items(path):
    data = open(path, "rb").read()
    at, items = 0, []
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        pcm = np.frombuffer(data, dtype="<f4", count=n, offset=at + 4)
        at += 4 + 4 * n
        (m,) = struct.unpack_from("<I", data, at)
        frames = np.frombuffer(data, dtype="<u4", count=m, offset=at + 4)
        at += 4 + 4 * m
        items.append((pcm, frames))
    return items


def run_ort(sess, batch):
    ids, lengths, scales = feed(batch)
    audio, durations, frames = sess.run(["output", "durations", "frames"],
                                        {"input": ids, "input_lengths": lengths, "scales": scales})
    out = []
    for r, b in enumerate(batch):
        n = int(frames[r]) * HOP
        out.append((audio[r].reshape(-1)[:n], durations[r].reshape(-1)[: len(b)].astype(np.uint32)))
    return out


def cmd_reference(a):
    sents = held_out(a.ids)
    sess = ort_session(with_durations(a.model), a.threads)
    t = time.perf_counter()
    items = [run_ort(sess, [s])[0] for s in sents]
    secs = time.perf_counter() - t
    write_items(a.out, items)
    audio = sum(len(p) for p, _ in items) / 22050
    return {"sentences": len(items), "audio_seconds": audio, "seconds": secs, "threads": a.threads}


def snr_db(ref, x):
    noise = np.sum((ref.astype(np.float64) - x.astype(np.float64)) ** 2)
    signal = np.sum(ref.astype(np.float64) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(signal / noise))


def cmd_compare(a):
    ref, ours = read_items(a.ref), read_items(a.ours)
    total = len(ref)
    if len(ours) > total or (len(ours) < total and not a.prefix):
        sys.exit(f"{total} reference sentences, {len(ours)} ours")
    ref = ref[: len(ours)]
    snrs, dur_mismatch, len_mismatch, non_finite = [], [], 0, 0
    for i, ((rp, rf), (op, of)) in enumerate(zip(ref, ours)):
        non_finite += int(np.sum(~np.isfinite(op)))
        if not np.array_equal(rf, of):
            dur_mismatch.append(i)
        if len(rp) != len(op):
            len_mismatch += 1
            continue
        snrs.append(snr_db(rp, op))
    s = np.array(snrs) if snrs else np.array([float("nan")])
    ok = (not dur_mismatch and len_mismatch == 0 and non_finite == 0
          and len(snrs) == len(ref) and float(s.min()) >= a.min_snr)
    result = {
        "sentences": len(ref), "reference_sentences": total, "durations_identical": len(ref) - len(dur_mismatch),
        "duration_mismatches": dur_mismatch[:20], "length_mismatches": len_mismatch,
        "non_finite_samples": non_finite, "snr_db_min": float(s.min()),
        "snr_db_median": float(np.median(s)), "snr_db_mean": float(s.mean()),
        "snr_db_p05": float(np.percentile(s, 5)), "min_snr_gate": a.min_snr, "pass": ok,
    }
    return result, ok


def timed_passes(run_batch, sents, batch_sizes, passes, warm_all=False):
    """Median of `passes` timed passes per batch size. The untimed warm-up is a few batches, or
    with `warm_all` one whole pass (a runtime that tunes per shape, as cuDNN's search does, then
    meets no new shape while timed)."""
    rows = []
    for n in batch_sizes:
        groups = batches([len(s) for s in sents], n)
        for g in (groups if warm_all else groups[:4]):
            run_batch([sents[i] for i in g])
        times, samples = [], 0
        for _ in range(passes):
            t = time.perf_counter()
            samples = sum(run_batch([sents[i] for i in g]) for g in groups)
            times.append(time.perf_counter() - t)
        med = sorted(times)[len(times) // 2]
        audio = samples / 22050
        rows.append({"batch": n, "calls": len(groups), "mean_items": len(sents) / len(groups),
                     "audio_seconds": audio, "median_seconds": med,
                     "audio_seconds_per_second": audio / med, "times": times})
    return rows


def cmd_bench_ort(a):
    sents = held_out(a.ids)
    sess = ort_session(with_durations(a.model), a.threads)
    rows = timed_passes(lambda b: sum(len(p) for p, _ in run_ort(sess, b)), sents, a.batches, a.passes)
    return {"baseline": "onnxruntime-cpu", "onnxruntime": __import__("onnxruntime").__version__,
            "threads": a.threads, "rows": rows}


def ort_cuda_session(model_bytes, algo_search):
    """ONNX Runtime's CUDA execution provider, as `piper --cuda` runs it (plain `run`, outputs
    copied back to the host in every call). `algo_search` is the provider's
    `cudnn_conv_algo_search`: "EXHAUSTIVE" (its default) or "DEFAULT" (the known fix for slow
    Piper convolutions: the heuristic algorithm, no search per new shape)."""
    import onnxruntime as ort
    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # CUDA and cuDNN from the nvidia-* Python packages, when present
    so = ort.SessionOptions()
    so.log_severity_level = 3
    provider = ("CUDAExecutionProvider", {"device_id": 0, "cudnn_conv_algo_search": algo_search})
    sess = ort.InferenceSession(model_bytes, sess_options=so,
                                providers=[provider, "CPUExecutionProvider"])
    if sess.get_providers()[0] != "CUDAExecutionProvider":
        sys.exit(f"ONNX Runtime {ort.__version__} did not take the CUDA provider: {sess.get_providers()}")
    return sess


def cmd_bench_ort_cuda(a):
    import onnxruntime as ort
    sents = held_out(a.ids)
    model = with_durations(a.model)
    report = {"baseline": "onnxruntime-cuda", "onnxruntime": ort.__version__,
              "onnxruntime_file": ort.__file__, "runs": []}
    ref = read_items(a.ref) if a.ref else None
    for search in a.algo_search.split(","):
        start = t = time.perf_counter()
        sess = ort_cuda_session(model, search)
        run = {"cudnn_conv_algo_search": search, "session_seconds": time.perf_counter() - t}
        if ref:
            # Same graph and ids as the CPU reference: durations and SNR say the provider is right.
            got = [run_ort(sess, [s])[0] for s in sents[: a.check_limit or None]]
            snrs = [snr_db(r[0], g[0]) for r, g in zip(ref, got) if len(r[0]) == len(g[0])]
            run["durations_identical"] = sum(np.array_equal(r[1], g[1]) for r, g in zip(ref, got))
            run["sentences_checked"] = len(got)
            run["snr_db_min"] = min(snrs) if snrs else None
            run["snr_db_median"] = float(np.median(snrs)) if snrs else None
        run["rows"] = []
        for n in a.batches:
            if a.budget and time.perf_counter() - start > a.budget:
                run["rows"].append({"batch": n, "skipped": f"past --budget {a.budget} s"})
                continue
            t = time.perf_counter()
            row = timed_passes(lambda b: sum(len(p) for p, _ in run_ort(sess, b)), sents,
                               [n], a.passes, warm_all=True)[0]
            row["seconds_with_warmup"] = time.perf_counter() - t
            run["rows"].append(row)
            log(json.dumps({"cudnn_conv_algo_search": search, **row}))
        report["runs"].append(run)
    return report


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ["reference", "bench-ort", "bench-ort-cuda"]:
        s = sub.add_parser(name)
        s.add_argument("--model", required=True)
        s.add_argument("--ids", required=True)
        s.add_argument("--threads", type=int, default=os.cpu_count())
        s.add_argument("--batches", type=lambda v: [int(x) for x in v.split(",")], default=[1, 8, 64])
        s.add_argument("--passes", type=int, default=1)
        s.add_argument("--out")
        s.add_argument("--ref")
        s.add_argument("--budget", type=float, default=0,
                       help="bench-ort-cuda: seconds per algo search; rows that would start later are skipped")
        s.add_argument("--check-limit", type=int, default=0,
                       help="bench-ort-cuda: check only the first N sentences against --ref (0: all)")
        s.add_argument("--algo-search", default="EXHAUSTIVE,DEFAULT",
                       help="bench-ort-cuda: cudnn_conv_algo_search values to run, comma-separated")
    c = sub.add_parser("compare")
    c.add_argument("--ref", required=True)
    c.add_argument("--ours", required=True)
    c.add_argument("--min-snr", type=float, required=True)
    c.add_argument("--prefix", action="store_true", help="ours holds only the first sentences")
    a = p.parse_args()
    ok = True
    if a.cmd == "reference":
        if not a.out:
            sys.exit("reference needs --out")
        out = cmd_reference(a)
    elif a.cmd == "compare":
        out, ok = cmd_compare(a)
    elif a.cmd == "bench-ort":
        out = cmd_bench_ort(a)
    else:
        out = cmd_bench_ort_cuda(a)
    print(json.dumps(out))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
