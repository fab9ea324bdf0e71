# rmsnorm.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_rmsnorm (examples/sim_rmsnorm.tsl)
# config    {"add_engine":"vector","bufs":2,"cols_per_step":512,"dma_queues":2,"fuse_weight":false,"rows_per_tile":128,"scale_engine":"vector","square_engine":"scalar","stages":["load","reduce","scale"]}
# target    trn2
# computes  h = x + residual; y = h / sqrt(mean(h^2) + eps) * w, row by row
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.
# Where this kernel differs from the simulated plan:
#   - dma_queues = 2: NKI assigns DMA queues itself

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
ROWS = 512                                  # rows
COLS = 1024                                 # hidden
P = 128                                     # partitions (nl.tile_size.pmax)
ROWS_PER_TILE = 128                         # rows_per_tile
GROUPS = 1                                  # row groups of P rows per tile
CPS = 512                                   # cols_per_step: columns per instruction and DMA
TILES = 4
CHUNKS = 2
BUFS = 2                                    # input tile slots (bufs)
DT = nl.bfloat16                            # dtype
STAGES = ("load", "reduce", "scale",)       # issue order (bufs < 3: one tile's stages stay in dependency order)
LAG = {"load": 0, "reduce": 1, "scale": 1}  # stage s works on tile step - LAG[s]
EPS = 1e-06                                 # epsilon
ADD_ENGINE = nisa.engine.vector             # residual add (add_engine)
SQUARE_ENGINE = nisa.engine.scalar          # sum of squares (square_engine)
SCALE_ENGINE = nisa.engine.vector           # multiplies by the row's rstd (scale_engine)

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
    "dma": {"hbm->sbuf": (17, 2359296), "sbuf->hbm": (16, 2097152)},
    "psum_banks": 0,  # PSUM banks written
    "engines": {"tensor": 0, "vector": 24, "scalar": 12, "gpsimd": 0},  # instructions
}

@nki.jit
def rmsnorm_kernel(x, residual, w):
    y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    h = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    # SBUF: BUFS slots of whole-row tiles, [partition = row, slot, group, column]
    x_sb = nl.ndarray((P, BUFS, GROUPS, COLS), dtype=DT, buffer=nl.sbuf)
    residual_sb = nl.ndarray((P, BUFS, GROUPS, COLS), dtype=DT, buffer=nl.sbuf)
    w_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # the weight on every partition
    parts = nl.ndarray((P, BUFS, GROUPS, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)
    rstd = nl.ndarray((P, BUFS, GROUPS), dtype=nl.float32, buffer=nl.sbuf)
    squares = nl.ndarray((P, CPS), dtype=nl.float32, buffer=nl.sbuf)
    scaled = nl.ndarray((P, CPS), dtype=DT, buffer=nl.sbuf)
    y_stage = nl.ndarray((P, 2, CPS), dtype=DT, buffer=nl.sbuf)  # output staging
    w_row = w.reshape((1, COLS))
    for p in nl.affine_range(P):  # the weight, broadcast to the partitions once
        nisa.dma_copy(dst=w_sb[p:p + 1, :], src=w_row[0:1, :])

    def load(t):
        s = t % BUFS
        for j in nl.affine_range(GROUPS):
            r0 = t * ROWS_PER_TILE + j * P
            n = min(P, ROWS - r0)
            for c in nl.affine_range(CHUNKS):
                c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
                nisa.dma_copy(dst=x_sb[0:n, s, j, c0:c1], src=x[r0:r0 + n, c0:c1])
                nisa.dma_copy(dst=residual_sb[0:n, s, j, c0:c1], src=residual[r0:r0 + n, c0:c1])

    def reduce(t):
        """h = x + residual (stored), sum of squares per chunk (fp32), then rstd per row."""
        s = t % BUFS
        for j in nl.affine_range(GROUPS):
            r0 = t * ROWS_PER_TILE + j * P
            n = min(P, ROWS - r0)
            for c in nl.affine_range(CHUNKS):
                c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
                xs = x_sb[0:n, s, j, c0:c1]
                nisa.tensor_tensor(dst=xs, data1=xs, data2=residual_sb[0:n, s, j, c0:c1], op=nl.add, engine=ADD_ENGINE)
                nisa.dma_copy(dst=h[r0:r0 + n, c0:c1], src=xs)  # h, the next layer's residual
                part = parts[0:n, s, j, c:c + 1]
                nisa.activation(dst=squares[0:n, 0:c1 - c0], op=nl.square, data=xs, reduce_op=nl.add,
                                reduce_res=part, reduce_cmd=nisa.reduce_cmd.reset_reduce)
            total = rstd[0:n, s, j:j + 1]
            nisa.tensor_reduce(dst=total, op=nl.add, data=parts[0:n, s, j, :], axis=1, keepdims=True)
            nisa.activation(dst=total, op=nl.rsqrt, data=total, scale=1.0 / COLS, bias=EPS)

    def scale(t):
        """y = h * rstd * w, chunk by chunk, through the output staging."""
        s = t % BUFS
        for j in nl.affine_range(GROUPS):
            r0 = t * ROWS_PER_TILE + j * P
            n = min(P, ROWS - r0)
            for c in nl.affine_range(CHUNKS):
                c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
                out = y_stage[0:n, c % 2, 0:c1 - c0]
                nisa.tensor_scalar(dst=scaled[0:n, 0:c1 - c0], data=x_sb[0:n, s, j, c0:c1], op0=nl.multiply, operand0=rstd[0:n, s, j:j + 1], engine=SCALE_ENGINE)
                nisa.tensor_tensor(dst=out, data1=scaled[0:n, 0:c1 - c0], data2=w_sb[0:n, c0:c1], op=nl.multiply, engine=nisa.engine.vector)
                nisa.dma_copy(dst=y[r0:r0 + n, c0:c1], src=out)

    stages = {"load": load, "reduce": reduce, "scale": scale}
    for step in nl.sequential_range(TILES + LAG["scale"]):
        for stage in STAGES:
            t = step - LAG[stage]
            if 0 <= t < TILES:
                stages[stage](t)
    return y, h


def reference(x, residual, w):
    """The outputs in float64, from the same inputs."""
    h = x.astype(np.float64) + residual
    rstd = 1.0 / np.sqrt(np.mean(h * h, axis=1, keepdims=True) + EPS)
    return {"y": h * rstd * w.astype(np.float64)[None, :], "h": h}
