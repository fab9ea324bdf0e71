# rmsnorm.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_rmsnorm (examples/sim_rmsnorm.tsl)
# config    {"add_engine":"vector","bufs":2,"cols_per_step":512,"fuse_weight":false,"rows_per_tile":128,"scale_engine":"vector","square_engine":"scalar","stages":["load","reduce","scale"]}
# target    trn2
# computes  h = x + residual; y = h / sqrt(mean(h^2) + eps) * w, row by row
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
COLS = 1024                                 # hidden
P = 128                                     # partitions (nl.tile_size.pmax)
ROWS_PER_TILE = 128                         # rows_per_tile
G = 1                                       # rows of a tile per partition (row groups)
TILE_PARTS = 128                            # partitions of a full tile
CPS = 512                                   # cols_per_step: columns per instruction and DMA
TILES = 4
CHUNKS = 2
BUFS = 2                                    # input tile slots (bufs)
DT = nl.bfloat16                            # dtype
STAGES = ("load", "reduce", "scale",)       # issue order (bufs < 3: one tile's stages stay in dependency order)
LAG = {"load": 0, "reduce": 1, "scale": 1}  # stage s works on tile step - LAG[s]
EPS = 1e-06                                 # epsilon
ADD_ENGINE = nisa.engine.vector             # residual add (add_engine)
SQUARE_ENGINE = nisa.engine.scalar          # squares (square_engine)

INPUTS = {"x": ((ROWS, COLS), "bfloat16"), "residual": ((ROWS, COLS), "bfloat16"), "w": ((COLS,), "bfloat16")}
OUTPUTS = {"y": ((ROWS, COLS), "bfloat16"), "h": ((ROWS, COLS), "bfloat16")}
TOLERANCE = 0.015625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (17, 2099200), "sbuf->hbm": (16, 2097152), "sbuf->sbuf": (7, 260096)},
    "psum_banks": 0,  # PSUM banks written
    "engines": {"tensor": 0, "vector": 28, "scalar": 12, "gpsimd": 0},  # instructions
}

@nki.jit
def rmsnorm_kernel(x, residual, w):
    y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    h = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    xv = x.reshape((ROWS // G, G, COLS))
    residualv = residual.reshape((ROWS // G, G, COLS))
    yv = y.reshape((ROWS // G, G, COLS))
    hv = h.reshape((ROWS // G, G, COLS))
    # SBUF: BUFS slots of whole-row tiles, [partition, slot, row group, column]
    x_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)
    residual_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)
    w_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # the weight on every partition
    parts = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)  # sums of h^2
    rstd = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)
    squares = nl.ndarray((P, 2, CPS), dtype=nl.float32, buffer=nl.sbuf)
    scaled = nl.ndarray((P, 2, CPS), dtype=DT, buffer=nl.sbuf)
    y_stage = nl.ndarray((P, 2, G, CPS), dtype=DT, buffer=nl.sbuf)  # output staging
    nisa.dma_copy(dst=w_sb[0:1, :], src=w.reshape((1, COLS))[0:1, :])
    for have in (1 << i for i in range((P - 1).bit_length())):  # doubled on chip
        n = min(have, P - have)
        nisa.dma_copy(dst=w_sb[have:have + n, :], src=w_sb[0:n, :])

    def load(t):
        s = t % BUFS
        q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view
        n = min(TILE_PARTS, ROWS // G - q0)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            nisa.dma_copy(dst=x_sb[0:n, s, :, c0:c1], src=xv[q0:q0 + n, :, c0:c1])
            nisa.dma_copy(dst=residual_sb[0:n, s, :, c0:c1], src=residualv[q0:q0 + n, :, c0:c1])

    def reduce(t):
        """h = x + residual (stored), the sum of squares per chunk and row (fp32), then rstd per row."""
        s = t % BUFS
        q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view
        n = min(TILE_PARTS, ROWS // G - q0)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            cw = c1 - c0
            for g in nl.affine_range(G):
                nisa.tensor_tensor(dst=x_sb[0:n, s, g, c0:c1], data1=x_sb[0:n, s, g, c0:c1],
                   data2=residual_sb[0:n, s, g, c0:c1], op=nl.add, engine=ADD_ENGINE)
            nisa.dma_copy(dst=hv[q0:q0 + n, :, c0:c1], src=x_sb[0:n, s, :, c0:c1])  # h
            for g in nl.affine_range(G):
                xs, sq = x_sb[0:n, s, g, c0:c1], squares[0:n, g % 2, 0:cw]
                nisa.activation(dst=sq, op=nl.square, data=xs, reduce_op=nl.add,
                                reduce_res=parts[0:n, s, g, c:c + 1], reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.tensor_reduce(dst=rstd[0:n, s, :], op=nl.add, data=parts[0:n, s, :, :], axis=2)
        nisa.activation(dst=rstd[0:n, s, :], op=nl.rsqrt, data=rstd[0:n, s, :], scale=1.0 / COLS, bias=EPS)

    def scale(t):
        """y = h * rstd * w, chunk by chunk, through the output staging."""
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
                xs, out, r = x_sb[0:n, s, g, c0:c1], y_stage[0:n, slot, g, 0:cw], rstd[0:n, s, g:g + 1]
                sc = scaled[0:n, g % 2, 0:cw]
                nisa.tensor_scalar(dst=sc, data=xs, op0=nl.multiply, operand0=r, engine=nisa.engine.vector)
                nisa.tensor_tensor(dst=out, data1=sc, data2=w_sb[0:n, c0:c1], op=nl.multiply, engine=nisa.engine.vector)
            nisa.dma_copy(dst=yv[q0:q0 + n, :, c0:c1], src=y_stage[0:n, slot, :, 0:cw])

    stages = 0  # output staging slots used (trace-time)
    run = {"load": load, "reduce": reduce, "scale": scale}
    for step in nl.sequential_range(TILES + LAG["scale"]):
        for stage in STAGES:
            t = step - LAG[stage]
            if 0 <= t < TILES:
                run[stage](t)
    return y, h


def reference(x, residual, w):
    """The outputs in float64, from the same inputs."""
    h = x.astype(np.float64) + residual
    rstd = 1.0 / np.sqrt(np.mean(h * h, axis=1, keepdims=True) + EPS)
    return {"y": h * rstd * w.astype(np.float64)[None, :], "h": h}
