"""A command for the gated `command:` tests: C = A @ B from .npy files.
  gated_matmul.py MODE   read $TESSEL_INPUT_DIR/{A,B}.npy, write
                         $TESSEL_OUTPUT_DIR/C.npy, print a time (every run
                         of a gated command is the same).
MODE: honest, zeros (writes zeros), skip (half the rows), reference (float64,
for gate_reference; prints nothing)."""
import json
import os
import sys

import numpy as np

mode = sys.argv[1]
a = np.load(os.path.join(os.environ["TESSEL_INPUT_DIR"], "A.npy"))
b = np.load(os.path.join(os.environ["TESSEL_INPUT_DIR"], "B.npy"))
c = np.matmul(a.astype(np.float64), b.astype(np.float64))
if mode == "zeros":
    c = np.zeros_like(c)
elif mode == "skip":
    c[c.shape[0] // 2:] = 0
out = c if mode == "reference" else c.astype(np.float32)
np.save(os.path.join(os.environ["TESSEL_OUTPUT_DIR"], "C.npy"), out)
if mode != "reference":
    tile = int(os.environ.get("TESSEL_TILE", "1"))
    print(json.dumps({"objective": 1.0 + 1.0 / tile}))
