# softmax.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_softmax (examples/sim_softmax.tsl)
# config    {"bufs":2,"cols_per_step":256,"rows_per_tile":128,"scale_engine":"vector","stages":["load","reduce","scale"]}
# target    trn2
# computes  y = exp(x - rowmax) / rowsum, row by row
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
ROWS = 512                                  # rows
COLS = 1024                                 # cols
P = 128                                     # partitions (nl.tile_size.pmax)
ROWS_PER_TILE = 128                         # rows_per_tile
G = 1                                       # rows of a tile per partition (row groups)
TILE_PARTS = 128                            # partitions of a full tile
CPS = 256                                   # cols_per_step: columns per instruction and DMA
TILES = 4
CHUNKS = 4
BUFS = 2                                    # input tile slots (bufs)
DT = nl.bfloat16                            # dtype
STAGES = ("load", "reduce", "scale",)       # issue order (bufs < 3: one tile's stages stay in dependency order)
LAG = {"load": 0, "reduce": 1, "scale": 1}  # stage s works on tile step - LAG[s]
SCALE_ENGINE = nisa.engine.vector           # multiplies by 1/sum (scale_engine)

INPUTS = {"x": ((ROWS, COLS), "bfloat16")}
OUTPUTS = {"y": ((ROWS, COLS), "bfloat16")}
TOLERANCE = 0.015625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (16, 1048576), "sbuf->hbm": (16, 1048576)},
    "psum_banks": 0,  # PSUM banks written
    "engines": {"tensor": 0, "vector": 44, "scalar": 16, "gpsimd": 0},  # instructions
}

@nki.jit
def softmax_kernel(x):
    y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    xv = x.reshape((ROWS // G, G, COLS))
    yv = y.reshape((ROWS // G, G, COLS))
    # SBUF: BUFS slots of whole-row tiles, [partition, slot, row group, column]
    x_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)
    parts = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)
    stat = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)  # -max, then 1/sum
    y_stage = nl.ndarray((P, 2, G, CPS), dtype=DT, buffer=nl.sbuf)  # output staging

    def load(t):
        s = t % BUFS
        q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view
        n = min(TILE_PARTS, ROWS // G - q0)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            nisa.dma_copy(dst=x_sb[0:n, s, :, c0:c1], src=xv[q0:q0 + n, :, c0:c1])

    def reduce(t):
        """Row max per chunk, -max per row, exp in place with the row sums (fp32), 1/sum."""
        s = t % BUFS
        q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view
        n = min(TILE_PARTS, ROWS // G - q0)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            for g in nl.affine_range(G):
                nisa.tensor_reduce(dst=parts[0:n, s, g, c:c + 1], op=nl.max, data=x_sb[0:n, s, g, c0:c1],
                   axis=1, keepdims=True)
        nisa.tensor_reduce(dst=stat[0:n, s, :], op=nl.max, data=parts[0:n, s, :, :], axis=2, negate=True)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            for g in nl.affine_range(G):
                xs = x_sb[0:n, s, g, c0:c1]
                nisa.activation(dst=xs, op=nl.exp, data=xs, bias=stat[0:n, s, g:g + 1], reduce_op=nl.add,
                                reduce_res=parts[0:n, s, g, c:c + 1], reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.tensor_reduce(dst=stat[0:n, s, :], op=nl.add, data=parts[0:n, s, :, :], axis=2)
        nisa.reciprocal(dst=stat[0:n, s, :], data=stat[0:n, s, :])

    def scale(t):
        """y = exp * (1/sum), chunk by chunk, through the output staging."""
        s = t % BUFS
        q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view
        n = min(TILE_PARTS, ROWS // G - q0)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            cw = c1 - c0
            nonlocal stages
            slot = stages % 2
            stages += 1
            for g in nl.affine_range(G):
                xs, out, r = x_sb[0:n, s, g, c0:c1], y_stage[0:n, slot, g, 0:cw], stat[0:n, s, g:g + 1]
                nisa.tensor_scalar(dst=out, data=xs, op0=nl.multiply, operand0=r, engine=SCALE_ENGINE)
            nisa.dma_copy(dst=yv[q0:q0 + n, :, c0:c1], src=y_stage[0:n, slot, :, 0:cw])

    stages = 0  # output staging slots used (trace-time)
    run = {"load": load, "reduce": reduce, "scale": scale}
    for step in nl.sequential_range(TILES + LAG["scale"]):
        for stage in STAGES:
            t = step - LAG[stage]
            if 0 <= t < TILES:
                run[stage](t)
    return y


def reference(x):
    """y in float64, from the same inputs."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}
