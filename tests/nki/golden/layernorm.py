# layernorm.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_layernorm (examples/sim_layernorm.tsl)
# config    {"bufs":2,"cols_per_step":512,"rows_per_tile":128,"scale_engine":"vector","stages":["load","reduce","scale"],"stats_engine":"scalar"}
# target    trn2
# computes  y = (x - mean) / sqrt(var + eps) * gamma + beta, row by row
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
EPS = 1e-05                                 # epsilon

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
    "dma": {"hbm->sbuf": (10, 1052672), "sbuf->hbm": (8, 1048576), "sbuf->sbuf": (14, 520192)},
    "psum_banks": 0,  # PSUM banks written
    "engines": {"tensor": 0, "vector": 48, "scalar": 20, "gpsimd": 0},  # instructions
}

@nki.jit
def layernorm_kernel(x, gamma, beta):
    y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    xv = x.reshape((ROWS // G, G, COLS))
    yv = y.reshape((ROWS // G, G, COLS))
    # SBUF: BUFS slots of whole-row tiles, [partition, slot, row group, column]
    x_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)
    gamma_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # on every partition
    beta_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)
    sums = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)
    squares = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)
    rstd = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)
    bias = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)  # -mean * rstd
    tmp = nl.ndarray((P, 3, G), dtype=nl.float32, buffer=nl.sbuf)  # per-row scratch
    scratch = nl.ndarray((P, 2, CPS), dtype=nl.float32, buffer=nl.sbuf)
    normalized = nl.ndarray((P, 2, CPS), dtype=nl.float32, buffer=nl.sbuf)  # y rounds once
    y_stage = nl.ndarray((P, 2, G, CPS), dtype=DT, buffer=nl.sbuf)  # output staging
    nisa.dma_copy(dst=gamma_sb[0:1, :], src=gamma.reshape((1, COLS))[0:1, :])
    for have in (1 << i for i in range((P - 1).bit_length())):  # doubled on chip
        n = min(have, P - have)
        nisa.dma_copy(dst=gamma_sb[have:have + n, :], src=gamma_sb[0:n, :])
    nisa.dma_copy(dst=beta_sb[0:1, :], src=beta.reshape((1, COLS))[0:1, :])
    for have in (1 << i for i in range((P - 1).bit_length())):  # doubled on chip
        n = min(have, P - have)
        nisa.dma_copy(dst=beta_sb[have:have + n, :], src=beta_sb[0:n, :])

    def load(t):
        s = t % BUFS
        q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view
        n = min(TILE_PARTS, ROWS // G - q0)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            nisa.dma_copy(dst=x_sb[0:n, s, :, c0:c1], src=xv[q0:q0 + n, :, c0:c1])

    def reduce(t):
        """Row sums and sums of squares per chunk (fp32), then rstd and -mean * rstd per row."""
        s = t % BUFS
        q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view
        n = min(TILE_PARTS, ROWS // G - q0)
        for c in nl.affine_range(CHUNKS):
            c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)
            cw = c1 - c0
            for g in nl.affine_range(G):
                xs, sc = x_sb[0:n, s, g, c0:c1], scratch[0:n, g % 2, 0:cw]
                nisa.activation(dst=sc, op=nl.copy, data=xs, reduce_op=nl.add,
                                reduce_res=sums[0:n, s, g, c:c + 1], reduce_cmd=nisa.reduce_cmd.reset_reduce)
                nisa.activation(dst=sc, op=nl.square, data=xs, reduce_op=nl.add,
                                reduce_res=squares[0:n, s, g, c:c + 1], reduce_cmd=nisa.reduce_cmd.reset_reduce)
        s1, s2, nm2 = tmp[0:n, 0, :], tmp[0:n, 1, :], tmp[0:n, 2, :]
        r, b = rstd[0:n, s, :], bias[0:n, s, :]
        nisa.tensor_reduce(dst=s1, op=nl.add, data=sums[0:n, s, :, :], axis=2)
        nisa.tensor_reduce(dst=s2, op=nl.add, data=squares[0:n, s, :, :], axis=2)
        nisa.scalar_tensor_tensor(dst=nm2, data=s1, op0=nl.multiply, operand0=-1.0 / (COLS * COLS),
                          op1=nl.multiply, operand1=s1)  # -mean^2
        nisa.scalar_tensor_tensor(dst=r, data=s2, op0=nl.multiply, operand0=1.0 / COLS, op1=nl.add,
                          operand1=nm2)  # var
        nisa.tensor_scalar(dst=r, data=r, op0=nl.maximum, operand0=0.0, engine=nisa.engine.vector)  # rounding can make it < 0
        nisa.activation(dst=r, op=nl.rsqrt, data=r, bias=EPS)
        nisa.scalar_tensor_tensor(dst=b, data=s1, op0=nl.multiply, operand0=-1.0 / COLS, op1=nl.multiply,
                          operand1=r)  # -mean * rstd

    def scale(t):
        """y = (x * rstd - mean * rstd) * gamma + beta, chunk by chunk."""
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
                xs, xn = x_sb[0:n, s, g, c0:c1], normalized[0:n, g % 2, 0:cw]
                r, b = rstd[0:n, s, g:g + 1], bias[0:n, s, g:g + 1]
                nisa.tensor_scalar(dst=xn, data=xs, op0=nl.multiply, operand0=r, op1=nl.add, operand1=b,
                   engine=nisa.engine.vector)
                nisa.tensor_tensor(dst=xn, data1=xn, data2=gamma_sb[0:n, c0:c1], op=nl.multiply, engine=nisa.engine.vector)
                nisa.tensor_tensor(dst=y_stage[0:n, slot, g, 0:cw], data1=xn, data2=beta_sb[0:n, c0:c1], op=nl.add,
                   engine=nisa.engine.vector)
            nisa.dma_copy(dst=yv[q0:q0 + n, :, c0:c1], src=y_stage[0:n, slot, :, 0:cw])

    stages = 0  # output staging slots used (trace-time)
    run = {"load": load, "reduce": reduce, "scale": scale}
    for step in nl.sequential_range(TILES + LAG["scale"]):
        for stage in STAGES:
            t = step - LAG[stage]
            if 0 <= t < TILES:
                run[stage](t)
    return y


def reference(x, gamma, beta):
    """y in float64, from the same inputs."""
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return {"y": (x - mean) / np.sqrt(var + EPS) * gamma[None, :] + beta[None, :]}
