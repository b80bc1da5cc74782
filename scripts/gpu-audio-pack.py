#!/usr/bin/env python3
"""Packs `talker engine validate --save-audio DIR` output small enough to come back from the GPU host.

A device call returns at most 64 MiB in files of 16 MiB; three precisions of 200 sentences are
about 125 MB of 22.05 kHz WAV. Wide-band PESQ works at 16 kHz anyway, so each precision is
resampled there (polyphase, scipy) and stored as one compressed npz (names, lengths, int16 PCM):
about 25 MB each. scripts/gpu-pesq.py reads these files as it reads the WAV folders.

  scripts/gpu-audio-pack.py DIR OUTDIR [PRECISION...]   (default precisions: fp32 int8)
"""
import glob
import os
import sys

import numpy as np
from scipy.io import wavfile
from scipy.signal import resample_poly


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for p in sys.argv[3:] or ["fp32", "int8"]:
        files = sorted(glob.glob(os.path.join(src, p, "*.wav")))
        if not files:
            sys.exit(f"no {src}/{p}/*.wav")
        pcm, names = [], []
        for f in files:
            rate, data = wavfile.read(f)
            y = resample_poly(data.astype(np.float64), 16000, rate)
            pcm.append(np.clip(np.round(y), -32768, 32767).astype(np.int16))
            names.append(os.path.basename(f))
        out = os.path.join(dst, f"pq_{p}.npz")
        np.savez_compressed(out, lengths=np.array([len(x) for x in pcm]), names=np.array(names),
                            pcm=np.concatenate(pcm))
        print(p, len(files), os.path.getsize(out))


if __name__ == "__main__":
    main()
