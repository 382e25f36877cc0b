"""Calculator operators for the shapes the microbenchmarks time.

Each kernel in `kernels/` reports the FLOPs and bytes of the operator built here, and
`validate` predicts its time from the same operator with `roofline.calc.cost.op_cost`, so the
measured and predicted numbers always describe one shape counted one way.
"""

from __future__ import annotations

from ..calc.cost import Ceilings, activation_bytes, op_cost
from ..spec.forward import operators
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.operators import NORM_LAUNCHES, ROPE_LAUNCHES, Op, Step, sdpa_op
from ..spec.precision import Precision

#: Elements each streaming kernel moves per element of its buffers, and its FLOPs per element.
#: copy: read src + write dst; read: a reduction reads once; triad a = b + s·c: read b, c,
#: write a (STREAM convention, write-allocate not counted); 2 FLOPs (multiply, add).
STREAM_ELEMS_MOVED = {"copy": 2, "read": 1, "triad": 3}
STREAM_FLOPS_PER_ELEM = {"copy": 0, "read": 0, "triad": 2}


def gemm_op(M: int, N: int, K: int) -> Op:
    """C (M,N) = A (M,K) · W (K,N): 2·M·N·K FLOPs; W counted as weights, A and C as
    activations, as the calculator counts every projection of a layer."""
    return Op(
        "gemm",
        "matmul",
        flops=2 * M * N * K,
        weight_elems=K * N,
        act_elems=M * (K + N),
        weight_rows=N,
    )


def decode_gemm_shapes(m: ModelSpec) -> list[tuple[int, int]]:
    """(N, K) of every GEMM of one decode step of `m`, per instance, in step order."""
    shapes: list[tuple[int, int]] = []
    for op in operators(m, Step(1, 1, 1)):
        if op.kind == "matmul" and op.weight_rows:
            n = int(op.weight_rows) // op.instances
            shape = (n, int(op.weight_elems) // int(op.weight_rows))
            if shape not in shapes:
                shapes.append(shape)
    return shapes


def stream_op(kernel: str, elems: int) -> Op:
    """A bandwidth kernel over buffers of `elems` elements each."""
    return Op(
        f"stream/{kernel}",
        "elementwise",
        flops=STREAM_FLOPS_PER_ELEM[kernel] * elems,
        act_elems=STREAM_ELEMS_MOVED[kernel] * elems,
    )


#: Launches of the eager chain (`kernels.micro.eager_chain_case`), counted as the calculator
#: counts them (`roofline.spec.operators`): two RMSNorms of NORM_LAUNCHES each plus their residual
#: adds, and RoPE on q and k (ROPE_LAUNCHES).
EAGER_CHAIN_LAUNCHES = 2 * (NORM_LAUNCHES["rmsnorm"] + 1) + ROPE_LAUNCHES  # 24


def eager_chain_op(D: int, N: int, K: int, H: int) -> Op:
    """The elementwise work of one eager decoder layer on one token (the norms, residual adds
    and RoPE of `kernels.micro.eager_chain_case`): each launch reads its input and writes its
    output — a norm's 6 on D elements plus its add (2 in, 1 out), RoPE's 5 on q (N·H) and k
    (K·H) — and no FLOP worth counting (each is a few thousand)."""
    norm = NORM_LAUNCHES["rmsnorm"] * 2 * D + 3 * D
    rope = (ROPE_LAUNCHES // 2) * 2 * (N + K) * H
    elems = 2 * norm + rope
    return Op("eager/chain", "elementwise", flops=0, act_elems=elems, launches=EAGER_CHAIN_LAUNCHES)


def attention_op(B: int, T: int, S: int, N: int, K: int, H: int) -> Op:
    """One layer's attention core: append T tokens' K,V to a cache of S, attend over S + T
    (3 launches: the two cache writes and SDPA, as kernels/micro.py runs it)."""
    return sdpa_op(B, T, S, N, K, H)


def op_flops_bytes(op: Op, dtype: str) -> tuple[float, float]:
    """FLOPs and bytes of `op` with every tensor stored in `dtype`, as the calculator counts
    them (`cost.activation_bytes`: an fp8 GEMM writes its output in 16 bits)."""
    p = Precision.uniform(dtype)
    kv = (op.kv_read_elems + op.kv_write_elems) * p.kv_bytes
    moved = op.weight_elems * p.weight_bytes + activation_bytes(op, p) + kv
    return float(op.flops), float(moved)


def op_time_s(op: Op, hw: HardwareSpec, dtype: str, ceiling: str) -> float:
    """Predicted time of `op` on `hw` under `ceiling`, the calculator's own roofline."""
    p = Precision.uniform(dtype)
    return float(op_cost(op, p, Ceilings.of(hw, p.compute, ceiling)).time_s)  # type: ignore[arg-type]
