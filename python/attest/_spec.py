"""The declarations of one callable (attest.gate's keywords), in a module of their own: the
bridge, the call code and the worker all read them, and none of those imports another for it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence


@dataclass
class Spec:
    """What a callable declares; see attest.gate for the meaning of each field."""

    fn: Callable
    name: str
    recipe: str
    device: str = "cpu"
    dtype: str = "float32"
    layout: str = "bhsd"
    # What causal=True means to fn: "top_left" (torch SDPA), "bottom_right" (flash_attn), or "both":
    # fn then gets causal=False, "top_left" or "bottom_right".
    causal: str = "top_left"
    masks: Sequence[str] = ("none", "causal_tl")
    head_dims: Sequence[int] = ()
    gqa: bool = True
    cross: bool = True
    head_dim_v: bool = True
    lse: bool = False
    deterministic: bool = True
    bitwise: bool = False
    mutates_inputs: bool = False
    configs: Sequence[str] = ()
    supports: Optional[Callable[[dict], Optional[str]]] = None  # problem dict -> None or a refusal reason
    kwargs: dict = field(default_factory=dict)
    # Declarations of what the kernel legitimately does (reported in the coverage table):
    ftz: bool = False            # flushes subnormal outputs to zero
    row_align: int = 1           # elements: rows (every stride but the innermost) a multiple of it
    causal_cross: bool = True    # causal masks with seqlen_q != seqlen_kv
    accept: dict = field(default_factory=dict)  # check -> why: known failures accepted knowingly
    isolate: bool = True         # calls run in a worker process (python/attest/_worker.py)
    call_timeout: float = 600.0  # seconds: a call that takes longer is a hang (fault)
    # Where the C++ checks take their FP64 reference, floor and comparisons: "host" (attest gate's
    # oracles) or "device" (the device engine; attest.gate's default for device="cuda"). Set by the
    # gate; "device" makes workers spawned (the parent then runs CUDA itself).
    oracles: str = "host"
    stats: dict = field(default_factory=lambda: {"calls": 0, "fn_seconds": 0.0, "bridge_seconds": 0.0})
    last_error: Optional[str] = None
