"""A tiled matmul NKI kernel for `tessel tune --backend trainium` (docs/trainium.md).

tessel passes each config's parameters (matmul.tsl) as keyword arguments;
NKI traces the function, so they are compile-time constants of the NEFF.
matmul_ref is the reference tessel runs in its own process (never the
kernel's) on the hidden inputs, to check the kernel's outputs."""
import numpy as np
from neuronxcc import nki
import neuronxcc.nki.language as nl


@nki.jit
def matmul_kernel(a, b, tile_m=128, tile_n=512, tile_k=128):
    """C[M, N] = A[M, K] @ B[K, N], fp32 accumulation, tiled."""
    M, K = a.shape
    _, N = b.shape
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // tile_m):
        for n in nl.affine_range(N // tile_n):
            acc = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // tile_k):
                a_tile = nl.load(a[m * tile_m:(m + 1) * tile_m, k * tile_k:(k + 1) * tile_k])
                b_tile = nl.load(b[k * tile_k:(k + 1) * tile_k, n * tile_n:(n + 1) * tile_n])
                acc = nl.add(acc, nl.matmul(a_tile, b_tile))
            nl.store(c[m * tile_m:(m + 1) * tile_m, n * tile_n:(n + 1) * tile_n], value=acc)
    return c


def matmul_ref(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))
