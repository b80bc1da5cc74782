#!/usr/bin/env python3
"""Table of a `scripts/gpu-kernels OUT DIR NAME...` call (issue 21): throughput of each build per
round and its ratio to the first build, the audio comparison, the profiles with the host's share,
PyTorch eager FP16 when it ran, and the Nsight Compute sample grouped by kernel.

  python3 scripts/gpu-kernels-summary.py OUT NAME...   (OUT as written there, or unpacked here)
"""
import collections
import csv
import io
import json
import re
import statistics
import sys

from gpu_outputs import last_json, texts


def rates(doc):
    """{batch: audio-s per s} of a talker bench."""
    got = {}
    for res in (doc or {}).get("bench", []):
        for row in res.get("rows", []):
            got[row["batch"]] = row["audio_seconds_per_second"]
    return got


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def throughput(docs, names):
    rounds = sorted({int(m.group(1)) for k in docs for m in [re.match(r"bench-.+-(\d+)$", k)] if m})
    table = {(n, r): rates(last_json(docs.get(f"bench-{n}-{r}"))) for n in names for r in rounds}
    batches = sorted({b for t in table.values() for b in t})
    print("== FP16 throughput, audio-s per s (graphs off; rounds alternate the builds)")
    print(f"{'build':<10} {'round':>5} " + " ".join(f"{'b' + str(b):>8}" for b in batches))
    for r in rounds:
        for n in names:
            print(f"{n:<10} {r:>5} " + " ".join(f"{fmt(table[(n, r)].get(b)):>8}" for b in batches))
    base = names[0]
    print(f"== median over rounds, and ratio to {base}")
    med = {}
    for n in names:
        for b in batches:
            v = [table[(n, r)][b] for r in rounds if b in table[(n, r)]]
            med[(n, b)] = statistics.median(v) if v else None
    for n in names:
        cells = []
        for b in batches:
            m, m0 = med[(n, b)], med[(base, b)]
            ratio = m / m0 if m and m0 else None
            cells.append(f"{fmt(m):>6} ({fmt(ratio, '{:.2f}x')})")
        print(f"{n:<10} " + " ".join(cells))
    return med, batches


def compares(docs, names):
    for n in names[1:]:
        doc = last_json(docs.get(f"compare-{n}-vs-{names[0]}"))
        print(f"== audio of {n} against {names[0]}: {json.dumps(doc)[:400] if doc else 'not run'}")
    for n in names:
        doc = last_json(docs.get(f"gates-{n}"))
        if doc:
            print(f"== gates of {n} against ONNX Runtime CPU: {json.dumps(doc)[:400]}")


def profiles(docs, names):
    for n in sorted(set([names[0], names[-1]])):
        doc = last_json(docs.get(f"profile-{n}"))
        for res in (doc or {}).get("bench", []):
            for row in res.get("rows", []):
                for prof in row.get("profile", []):
                    kinds = prof.get("kinds", [])
                    total = sum(k["seconds"] for k in kinds) or 1.0
                    host = sum(k.get("host_seconds", 0.0) for k in kinds)
                    print(f"== profile of {n}, batch {row['batch']} (synced per step): {total:.3f} s, "
                          f"host queueing {host:.3f} s")
                    for k in kinds[:10]:
                        wk = k["work"]
                        hs = k.get("host_seconds")
                        print(f"  {k['op']:<24} {k['steps']:>6} steps {k['seconds']:>7.3f} s "
                              f"{100 * k['seconds'] / total:>5.1f}%  host {fmt(hs, '{:.3f}'):>6} s "
                              f"{wk['achieved_tflops']:>6.2f} TFLOP/s {wk['achieved_tb_per_s']:>6.3f} TB/s")


def torch(docs, med, names, batches):
    doc = last_json(docs.get("torch-fp16"))
    if not doc:
        return
    tr = {row["batch"]: row["audio_seconds_per_second"] for row in doc.get("rows", [])}
    print("== PyTorch eager FP16 (Piper's SynthesizerTrn, autocast), same call")
    for b in batches:
        cells = " ".join(f"{n} {fmt(med[(n, b)] / tr[b] if med[(n, b)] and tr.get(b) else None, '{:.2f}x')}"
                         for n in names)
        print(f"  batch {b}: torch {fmt(tr.get(b))}; ratio to torch: {cells}")


def ncu(docs):
    """Every kernel of the marked pass: GPU time per kernel name against the pass's wall."""
    text = docs.get("ncu")
    if not text:
        return
    rows = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not rows:
        print("== ncu: no rows (see log.txt)")
        return
    total = collections.Counter()
    count = collections.Counter()
    scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
    for r in csv.DictReader(io.StringIO("\n".join(rows))):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            value = float(r["Metric Value"].replace(",", "")) * scale.get(r.get("Metric Unit", ""), 1e-9)
        except (KeyError, ValueError):
            continue
        name = r.get("Kernel Name", "?")
        name = re.sub(r"\(.*", "", name)
        total[name] += value
        count[name] += 1
    busy = sum(total.values())
    print(f"== ncu, every kernel of the marked pass: {sum(count.values())} launches, "
          f"{busy:.3f} s of GPU time")
    # The bench's own report (a JSON line among ncu's): the audio the pass made, so the GPU time
    # reads as the rate the kernels alone would allow, with the host's queueing hidden.
    audio = None
    for ln in text.splitlines():
        if ln.startswith('{"bench"'):
            for res in json.loads(ln).get("bench", []):
                for row in res.get("rows", []):
                    audio = row.get("audio_seconds")
    if audio and busy:
        print(f"  {audio:.1f} audio-s: {1e3 * busy / audio:.3f} ms of kernels per audio-s, "
              f"a bound of {audio / busy:.0f} audio-s per s with the host hidden")
    for name, t in total.most_common(15):
        print(f"  {name[:48]:<48} {count[name]:>6} x {1e6 * t / count[name]:>8.1f} us = {t:.3f} s "
              f"({100 * t / busy:.1f}%)")


def main():
    out, names = sys.argv[1], sys.argv[2:]
    docs = texts(out)
    compares(docs, names)
    profiles(docs, names)
    ncu(docs)
    med, batches = throughput(docs, names)
    torch(docs, med, names, batches)


if __name__ == "__main__":
    main()
