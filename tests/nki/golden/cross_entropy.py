# cross_entropy.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     cross_entropy (examples/cross_entropy.tsl)
# config    {"bufs":2,"order":["t","v"],"pick_engine":"vector","token_tile":128,"vocab_chunk":512}
# target    trn2
# computes  loss = logsumexp(x^T W) - (x^T W)[label] per token, x given as [d_model, tokens]
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
TOKENS = 256
D_MODEL = 256
VOCAB = 1000
P = 128                           # partitions (nl.tile_size.pmax)
TOKEN_TILE = 128                  # token_tile: tokens per x tile
VOCAB_CHUNK = 512                 # vocab_chunk: logits per W chunk
MM_N = 512                        # logits per matmul (divides a PSUM bank)
Z_COLS = 512                      # PSUM columns per row tile: whole banks, so no matmul output crosses one
Z_SETS = 8                        # units whose logits fit PSUM at once (bank sets in rotation)
MM_K = 128                        # contraction of a matmul: rows of a d_model slab (mm_k)
K_SLABS = 2                       # MM_K-row slabs of d_model (the contraction)
T_SUBS = 1                        # 128-token row tiles of a token tile
STATE_SUBS = 1                    # row tiles whose running state is kept: the token tile's
TOKEN_TILES = 2
CHUNKS = 2
X_SLOTS = 2                       # x tiles are outer (min(bufs, 2) slots)
W_SLOTS = 2                       # W chunks stream (bufs slots)
PICK_ENGINE = nisa.engine.vector  # builds the one-hot masks (pick_engine)
DT = nl.bfloat16                  # dtype of x and W

INPUTS = {"x": ((D_MODEL, TOKENS), "bfloat16"), "W": ((D_MODEL, VOCAB), "bfloat16"),
          "labels": ((TOKENS,), "int32", VOCAB)}  # labels in [0, VOCAB)
OUTPUTS = {"loss": ((TOKENS,), "float32")}
TOLERANCE = 0.000244140625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {(128, 128, 488): 4, (128, 128, 512): 4},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (14, 1156096), "sbuf->hbm": (2, 1024)},
    "psum_banks": 4,  # PSUM banks written
    "engines": {"tensor": 8, "vector": 24, "scalar": 8, "gpsimd": 1},  # instructions
}

@nki.jit
def cross_entropy_kernel(x, W, labels):
    loss = nl.ndarray((TOKENS,), dtype=nl.float32, buffer=nl.shared_hbm)
    loss_rows, label_rows = loss.reshape((TOKENS, 1)), labels.reshape((TOKENS, 1))
    x_sb = nl.ndarray((P, X_SLOTS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # x^T
    w_sb = nl.ndarray((P, W_SLOTS, K_SLABS, VOCAB_CHUNK), dtype=DT, buffer=nl.sbuf)
    z_psum = nl.ndarray((P, Z_SETS * T_SUBS, Z_COLS), dtype=nl.float32, buffer=nl.psum)  # logits
    e_sb = nl.ndarray((P, VOCAB_CHUNK), dtype=nl.float32, buffer=nl.sbuf)  # exp scratch
    pick_sb = nl.ndarray((P, VOCAB_CHUNK), dtype=nl.float32, buffer=nl.sbuf)  # one-hot
    state = nl.ndarray((P, STATE_SUBS, 4), dtype=nl.float32, buffer=nl.sbuf)  # -max (two slots), sum, label logit
    label_i = nl.ndarray((P, STATE_SUBS), dtype=nl.int32, buffer=nl.sbuf)
    tmp = nl.ndarray((P, 4), dtype=nl.float32, buffer=nl.sbuf)  # per-token scratch
    column = nisa.iota(nl.arange(VOCAB_CHUNK)[None, :] + 0 * nl.arange(P)[:, None], dtype=nl.float32)

    def load_labels(t0, tn):
        """A token tile's labels, one DMA per row tile."""
        for ts in nl.affine_range((tn + P - 1) // P):
            tr = min(P, tn - ts * P)
            g = t0 // P + ts if STATE_SUBS > T_SUBS else ts
            nisa.dma_copy(dst=label_i[0:tr, g:g + 1], src=label_rows[t0 + ts * P:t0 + ts * P + tr, 0:1])

    def load_slabs(dst, src, col0, cols):
        """Rows of d_model, one DMA per MM_K-row slab."""
        for s in nl.affine_range(K_SLABS):
            r = min(MM_K, D_MODEL - s * MM_K)
            nisa.dma_copy(dst=dst[0:r, s, 0:cols], src=src[s * MM_K:s * MM_K + r, col0:col0 + cols])

    def unit(t0, tn, xs, c, ws, zs):
        """The logits of chunk c for a token tile (bank set zs), folded into each token's running state."""
        c0 = c * VOCAB_CHUNK
        cw = min(VOCAB_CHUNK, VOCAB - c0)
        for ts in nl.affine_range((tn + P - 1) // P):
            tr = min(P, tn - ts * P)
            g = t0 // P + ts if STATE_SUBS > T_SUBS else ts  # the row tile's running state
            zt = zs * T_SUBS + ts
            slabs = K_SLABS
            for n in nl.affine_range((cw + MM_N - 1) // MM_N):
                nw = min(MM_N, cw - n * MM_N)
                for s in nl.affine_range(slabs):  # logits accumulate over d_model in PSUM
                    r = min(MM_K, D_MODEL - s * MM_K)
                    nisa.nc_matmul(dst=z_psum[0:tr, zt, n * MM_N:n * MM_N + nw],
                                   stationary=x_sb[0:r, xs, s, ts * P:ts * P + tr],
                                   moving=w_sb[0:r, ws, s, n * MM_N:n * MM_N + nw], accumulate=s > 0)
            z = z_psum[0:tr, zt, 0:cw]
            # the running -max sits in slot c % 2, so the old one stays for the correction
            nm_old, nm = state[0:tr, g, (c + 1) % 2:(c + 1) % 2 + 1], state[0:tr, g, c % 2:c % 2 + 1]
            l, picked = state[0:tr, g, 2:3], state[0:tr, g, 3:4]
            chunk_nm, chunk_sum, picked_now, alpha = (tmp[0:tr, i:i + 1] for i in range(4))
            if c == 0:
                nisa.tensor_reduce(dst=nm, op=nl.max, data=z, axis=1, keepdims=True, negate=True)
            else:
                nisa.tensor_reduce(dst=chunk_nm, op=nl.max, data=z, axis=1, keepdims=True, negate=True)
                nisa.tensor_tensor(dst=nm, data1=nm_old, data2=chunk_nm, op=nl.minimum, engine=nisa.engine.vector)
            nisa.activation(dst=e_sb[0:tr, 0:cw], op=nl.exp, data=z, bias=nm, reduce_op=nl.add,
                            reduce_res=l if c == 0 else chunk_sum, reduce_cmd=nisa.reduce_cmd.reset_reduce)
            # the label's logit: a one-hot mask (column + c0 == label) times the logits, summed
            nisa.tensor_scalar(dst=pick_sb[0:tr, 0:cw], data=column[0:tr, 0:cw], op0=nl.add, operand0=float(c0),
                               op1=nl.equal, operand1=label_i[0:tr, g:g + 1], engine=PICK_ENGINE)
            nisa.tensor_tensor(dst=pick_sb[0:tr, 0:cw], data1=pick_sb[0:tr, 0:cw], data2=z, op=nl.multiply,
                               engine=nisa.engine.vector)
            nisa.tensor_reduce(dst=picked if c == 0 else picked_now, op=nl.add, data=pick_sb[0:tr, 0:cw], axis=1,
                               keepdims=True)
            if c > 0:  # l = l * exp(m_old - m_new) + chunk_sum; picked += picked_now
                nisa.activation(dst=alpha, op=nl.exp, data=nm_old, scale=-1.0, bias=nm)
                nisa.scalar_tensor_tensor(dst=l, data=l, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=chunk_sum)
                nisa.tensor_tensor(dst=picked, data1=picked, data2=picked_now, op=nl.add, engine=nisa.engine.vector)
            if c == CHUNKS - 1:  # loss = ln(sum) - (-max) - label logit
                ln = tmp[0:tr, 0:1]
                nisa.activation(dst=ln, op=nl.log, data=l)
                nisa.scalar_tensor_tensor(dst=ln, data=ln, op0=nl.subtract, operand0=nm, op1=nl.subtract, operand1=picked)
                nisa.dma_copy(dst=loss_rows[t0 + ts * P:t0 + ts * P + tr, 0:1], src=ln)

    # trace-time state: slot rotations, the blocks in them, the PSUM bank sets
    x_loads = w_loads = units = 0
    x_last = w_last = None
    # order (t, v): x tiles outer, W chunks streamed
    for tt in nl.affine_range(TOKEN_TILES):
        for c in nl.sequential_range(CHUNKS):  # carries the running state
            t0, c0 = tt * TOKEN_TILE, c * VOCAB_CHUNK
            tn = min(TOKEN_TILE, TOKENS - t0)
            if tt != x_last:  # a new x tile: the next slot (and its labels)
                x_last, xs = tt, x_loads % X_SLOTS
                x_loads += 1
                load_slabs(x_sb[:, xs], x, t0, tn)
                load_labels(t0, tn)
            if c != w_last:  # a new W chunk: the next slot
                w_last, ws = c, w_loads % W_SLOTS
                w_loads += 1
                load_slabs(w_sb[:, ws], W, c0, min(VOCAB_CHUNK, VOCAB - c0))
            unit(t0, tn, xs, c, ws, units % Z_SETS)
            units += 1
    return loss


def reference(x, W, labels):
    """loss in float64, from the same inputs."""
    z = x.astype(np.float64).T @ W.astype(np.float64)
    top = z.max(axis=1)
    lse = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
    return {"loss": lse - z[np.arange(TOKENS), labels.astype(np.int64)]}
