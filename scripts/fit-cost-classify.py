"""One render's CPU by category, from `perf script -F comm,tid,ip,sym,dso` output (scripts/fit-cost).

Usage: fit-cost-classify.py STACKS REPORT CONFIG ROUND FREQ TOP
Prints the render's report with config, round and perf_cpu_seconds per category as one JSON line;
appends the leaf functions with the most samples per category to TOP.

A sample's category is decided by its stack, leaf first: the first frame that names one wins, so
a copy inside the YUV conversion counts as yuv, not as whatever called the conversion.
"""

import collections
import json
import re
import sys

# (category, test on a frame's symbol and object), in the order a frame is tried.
RULES = [
    ("x264", lambda sym, dso: "libx264" in dso),
    ("yuv", lambda sym, dso: "libswscale" in dso),
    ("x264", lambda sym, dso: re.search(r"ChunkWriter::encode_frame|Encoder::send_frame|receive_packet", sym)),
    ("yuv", lambda sym, dso: re.search(r"ChunkWriter::(convert_|set_base|write_changed|write_frame)|chunk::copy_block|chunk::put_rgb", sym)),
    ("audio", lambda sym, dso: re.search(r"ChunkWriter::(write_audio|encode_pcm)", sym)),
    ("mux", lambda sym, dso: "ChunkWriter::" in sym),
    ("assemble", lambda sym, dso: re.search(r"media::assemble|assemble::", sym)),
    ("frames", lambda sym, dso: re.search(r"talker::render::|FaceRig|slides::Deck|animate::", sym)),
    ("setup", lambda sym, dso: re.search(r"talker::(face|prepare|look|slides)::", sym)),
]


def frames_of(block):
    """(symbol, object) of each frame of one sample, leaf first."""
    out = []
    for line in block.split("\n")[1:]:
        m = re.match(r"\s*[0-9a-f]+ (.*) \((.*)\)$", line)
        if m:
            out.append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
    return out


def category(frames):
    for sym, dso in frames:
        for name, test in RULES:
            if test(sym, dso):
                return name
    return "other"


def main():
    stacks, report, config, rnd, freq, top = sys.argv[1:]
    counts = collections.Counter()
    leaves = collections.defaultdict(collections.Counter)
    for block in open(stacks).read().split("\n\n"):
        frames = frames_of(block.strip("\n"))
        if not frames:
            continue
        cat = category(frames)
        counts[cat] += 1
        sym, dso = frames[0]
        leaves[cat][f"{sym} ({dso.rsplit('/', 1)[-1]})"] += 1
    r = json.load(open(report))
    r["config"], r["round"] = config, int(rnd)
    r["perf_cpu_seconds"] = {c: n / float(freq) for c, n in sorted(counts.items())}
    print(json.dumps(r))
    with open(top, "a") as f:
        f.write(f"== {config}, round {rnd}: {sum(counts.values())} samples at {freq} Hz\n")
        for cat, n in counts.most_common():
            f.write(f"{cat}: {n} samples\n")
            for leaf, k in leaves[cat].most_common(8):
                f.write(f"    {k:6d}  {leaf}\n")


main()
