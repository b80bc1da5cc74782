#!/usr/bin/env python3
"""Measures rendered face states with a second landmark model: MediaPipe's face mesh.

The renderer's own 68-point net (face-api) draws an average-shaped eye whatever it sees: on the
portraits here it reports an eye aspect ratio of 0.27-0.31 even with both eyes painted over with
cheek colour (tests/lipsync.rs prints that control). MediaPipe's 468-point mesh follows the
eyelids, so it can say whether a rendered blink closes the eye. A development measurement, not a
product path: the renderer never runs Python.

  python3 scripts/face-measure.py DIR...

Each DIR holds the PNGs of `cargo run --example face_frames -- PORTRAIT DIR [full|head]`
(rest, blink, half-blink, rounded-ou, rounded-oh, spread-ih, spread-ss). Prints per DIR the eye
aspect ratio (Soukupova and Cech, MediaPipe's six-point eye contours, both eyes averaged) of
each state and the mouth width (corners 61-291) relative to rest, and one JSON object per DIR on
the last lines. Needs `pip install mediapipe==0.10.21` (Apache-2.0; the last release that
ships the .tflite models).
"""
import json
import os
import sys

import mediapipe as mp
import numpy as np
from PIL import Image

# MediaPipe face-mesh indices: p1..p6 of each eye in the order EAR expects (corner, two upper
# lid points, corner, two lower lid points), and the mouth corners.
EYES = ([33, 160, 158, 133, 153, 144], [362, 385, 387, 263, 373, 380])
CORNERS = (61, 291)
STATES = ["rest", "blink", "half-blink", "rounded-ou", "rounded-oh", "spread-ih", "spread-ss"]


def ear(p, eye):
    d = lambda a, b: float(np.linalg.norm(p[eye[a]] - p[eye[b]]))  # noqa: E731
    return (d(1, 5) + d(2, 4)) / (2.0 * d(0, 3))


def measure(mesh, path):
    img = np.asarray(Image.open(path).convert("RGB"))
    res = mesh.process(img)
    if not res.multi_face_landmarks:
        return None
    h, w = img.shape[:2]
    p = np.array([[l.x * w, l.y * h] for l in res.multi_face_landmarks[0].landmark])
    return {"ear": 0.5 * (ear(p, EYES[0]) + ear(p, EYES[1])),
            "width": float(np.linalg.norm(p[CORNERS[0]] - p[CORNERS[1]]))}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with mp.solutions.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=1,
                                         refine_landmarks=False) as mesh:
        for folder in sys.argv[1:]:
            got = {s: measure(mesh, os.path.join(folder, f"{s}.png")) for s in STATES}
            rest = got["rest"]
            row = {"dir": folder}
            for s, m in got.items():
                if m is None:
                    row[s] = "no face found"
                    continue
                row[s] = {"ear": round(m["ear"], 3),
                          "width_vs_rest": round(m["width"] / rest["width"] - 1.0, 3) if rest else None}
            print(json.dumps(row))


if __name__ == "__main__":
    main()
