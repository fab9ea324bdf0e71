"""A command for the gated `command:` tests: C = A @ B from .npy files.
  gated_matmul.py MODE   with TESSEL_GATE=1: read $TESSEL_INPUT_DIR/{A,B}.npy,
                         write $TESSEL_OUTPUT_DIR/C.npy; otherwise print a time.
MODE: honest, zeros (writes zeros), skip (half the rows), fast_liar (honest
outputs in the gate, but claims a time of 0 when timed: still gated, so its
time is only recorded after it passed), reference (float64, for gate_reference)."""
import json
import os
import sys

import numpy as np

mode = sys.argv[1]
if os.environ.get("TESSEL_GATE") == "1":
    a = np.load(os.path.join(os.environ["TESSEL_INPUT_DIR"], "A.npy"))
    b = np.load(os.path.join(os.environ["TESSEL_INPUT_DIR"], "B.npy"))
    c = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if mode == "zeros":
        c = np.zeros_like(c)
    elif mode == "skip":
        c[c.shape[0] // 2:] = 0
    out = c if mode == "reference" else c.astype(np.float32)
    np.save(os.path.join(os.environ["TESSEL_OUTPUT_DIR"], "C.npy"), out)
else:
    tile = int(os.environ.get("TESSEL_TILE", "1"))
    print(json.dumps({"objective": 1.0 + 1.0 / tile}))
