# layernorm.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_layernorm (examples/sim_layernorm.tsl)
# config    {"bufs":2,"cols_per_step":512,"dma_queues":2,"rows_per_tile":128,"scale_engine":"vector","stages":["load","reduce","scale"],"stats_engine":"scalar"}
# target    trn2
# computes  y = (x - mean) / sqrt(var + eps) * gamma + beta, row by row
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
EPS = 1e-05                                 # epsilon
SCALE_ENGINE = nisa.engine.vector           # (x - mean) * rstd (scale_engine)

INPUTS = {"x": ((ROWS, COLS), "bfloat16"), "gamma": ((COLS,), "bfloat16"), "beta": ((COLS,), "bfloat16")}
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
    "dma": {"hbm->sbuf": (9, 1572864), "sbuf->hbm": (8, 1048576)},
    "psum_banks": 0,  # PSUM banks written
    "engines": {"tensor": 0, "vector": 28, "scalar": 20, "gpsimd": 0},  # instructions
}

@nki.jit
def layernorm_kernel(x, gamma, beta):
    y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    # SBUF: BUFS slots of whole-row tiles, [partition = row, slot, group, column]
    x_sb = nl.ndarray((P, BUFS, GROUPS, COLS), dtype=DT, buffer=nl.sbuf)
    gamma_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # on every partition
    beta_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)
    sums = nl.ndarray((P, BUFS, GROUPS, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)
    squares = nl.ndarray((P, BUFS, GROUPS, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)
    stat = nl.ndarray((P, BUFS, GROUPS, 2), dtype=nl.float32, buffer=nl.sbuf)  # rstd, -mean * rstd
    tmp = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    scratch = nl.ndarray((P, CPS), dtype=nl.float32, buffer=nl.sbuf)
    normalized = nl.ndarray((P, CPS), dtype=DT, buffer=nl.sbuf)
    y_stage = nl.ndarray((P, 2, CPS), dtype=DT, buffer=nl.sbuf)  # output staging
    gamma_row, beta_row = gamma.reshape((1, COLS)), beta.reshape((1, COLS))
    for p in nl.affine_range(P):  # gamma and beta, broadcast to the partitions once
        nisa.dma_copy(dst=gamma_sb[p:p + 1, :], src=gamma_row[0:1, :])
        nisa.dma_copy(dst=beta_sb[p:p + 1, :], src=beta_row[0:1, :])

    def load(t):
        s = t % BUFS
        for j in nl.affine_range(GROUPS):
            r0 = t * ROWS_PER_TILE + j * P
            n = min(P, ROWS - r0)
            for c in nl.affine_range(CHUNKS):
                c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
                nisa.dma_copy(dst=x_sb[0:n, s, j, c0:c1], src=x[r0:r0 + n, c0:c1])

    def reduce(t):
        """Row sum and sum of squares per chunk (fp32), then rstd and -mean * rstd per row."""
        s = t % BUFS
        for j in nl.affine_range(GROUPS):
            r0 = t * ROWS_PER_TILE + j * P
            n = min(P, ROWS - r0)
            for c in nl.affine_range(CHUNKS):
                c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
                xs = x_sb[0:n, s, j, c0:c1]
                nisa.activation(dst=scratch[0:n, 0:c1 - c0], op=nl.copy, data=xs, reduce_op=nl.add,
                                reduce_res=sums[0:n, s, j, c:c + 1], reduce_cmd=nisa.reduce_cmd.reset_reduce)
                nisa.activation(dst=scratch[0:n, 0:c1 - c0], op=nl.square, data=xs, reduce_op=nl.add,
                                reduce_res=squares[0:n, s, j, c:c + 1], reduce_cmd=nisa.reduce_cmd.reset_reduce)
            rstd, bias = stat[0:n, s, j, 0:1], stat[0:n, s, j, 1:2]
            mean, mean_sq = tmp[0:n, 0:1], tmp[0:n, 1:2]
            nisa.tensor_reduce(dst=mean, op=nl.add, data=sums[0:n, s, j, :], axis=1, keepdims=True)
            nisa.tensor_scalar(dst=mean, data=mean, op0=nl.multiply, operand0=1.0 / COLS)
            nisa.tensor_reduce(dst=rstd, op=nl.add, data=squares[0:n, s, j, :], axis=1, keepdims=True)
            nisa.tensor_scalar(dst=rstd, data=rstd, op0=nl.multiply, operand0=1.0 / COLS)  # E[x^2]
            nisa.tensor_tensor(dst=mean_sq, data1=mean, data2=mean, op=nl.multiply)
            nisa.tensor_tensor(dst=rstd, data1=rstd, data2=mean_sq, op=nl.subtract)  # var
            nisa.tensor_scalar(dst=rstd, data=rstd, op0=nl.maximum, operand0=0.0)  # rounding can make it < 0
            nisa.activation(dst=rstd, op=nl.rsqrt, data=rstd, bias=EPS)
            nisa.tensor_tensor(dst=bias, data1=mean, data2=rstd, op=nl.multiply)
            nisa.tensor_scalar(dst=bias, data=bias, op0=nl.multiply, operand0=-1.0)

    def scale(t):
        """y = (x * rstd - mean * rstd) * gamma + beta, chunk by chunk."""
        s = t % BUFS
        for j in nl.affine_range(GROUPS):
            r0 = t * ROWS_PER_TILE + j * P
            n = min(P, ROWS - r0)
            rstd, bias = stat[0:n, s, j, 0:1], stat[0:n, s, j, 1:2]
            for c in nl.affine_range(CHUNKS):
                c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
                xn = normalized[0:n, 0:c1 - c0]
                nisa.tensor_scalar(dst=xn, data=x_sb[0:n, s, j, c0:c1], op0=nl.multiply, operand0=rstd, op1=nl.add,
                           operand1=bias, engine=SCALE_ENGINE)
                nisa.tensor_tensor(dst=xn, data1=xn, data2=gamma_sb[0:n, c0:c1], op=nl.multiply)
                out = y_stage[0:n, c % 2, 0:c1 - c0]
                nisa.tensor_tensor(dst=out, data1=xn, data2=beta_sb[0:n, c0:c1], op=nl.add)
                nisa.dma_copy(dst=y[r0:r0 + n, c0:c1], src=out)

    stages = {"load": load, "reduce": reduce, "scale": scale}
    for step in nl.sequential_range(TILES + LAG["scale"]):
        for stage in STAGES:
            t = step - LAG[stage]
            if 0 <= t < TILES:
                stages[stage](t)
    return y


def reference(x, gamma, beta):
    """y in float64, from the same inputs."""
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return {"y": (x - mean) / np.sqrt(var + EPS) * gamma[None, :] + beta[None, :]}
