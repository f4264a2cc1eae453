"""Calling a framework callable on attest's buffers: what the gate's callback kernel (_bridge.py,
in-process) and its worker processes (_worker.py) both do, in one module both import (neither
imports the other's internals). See _bridge.py's docstring for the conventions (layouts, dtypes,
configs, the input guard)."""
from __future__ import annotations

import ctypes
import time

import numpy as np

from . import _native as N

from ._spec import Spec

CPU_CONFIGS = ("contig", "batch2")
CUDA_CONFIGS = ("graph", "graph_side", "stream2", "churn")


def _np_view(t: N.Tensor) -> np.ndarray:
    """numpy float32 view of an attest_plugin_tensor's memory (logical shape, element strides)."""
    if t.dtype != N.DTYPE["f32"]:
        raise TypeError(f"tensor dtype code {t.dtype} is not float32")
    shape = tuple(t.shape[i] for i in range(t.rank))
    strides = tuple(t.strides[i] for i in range(t.rank))
    if any(s == 0 for s in shape):
        return np.zeros(shape, np.float32)
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    buf = (ctypes.c_float * extent).from_address(t.data)
    flat = np.frombuffer(buf, dtype=np.float32)
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=tuple(4 * s for s in strides))


def _torch():
    import torch  # noqa: PLC0415 (torch is optional: only callables that take torch tensors need it)

    return torch


# Messages by which frameworks refuse a problem at call time (a refusal, not an error).
REFUSAL_MARKERS = ("No available kernel", "No viable backend")


def _problem_dict(p: N.Problem) -> dict:
    return {"batch": p.batch, "heads_q": p.heads_q, "heads_kv": p.heads_kv, "seqlen_q": p.seqlen_q,
            "seqlen_kv": p.seqlen_kv, "head_dim": p.head_dim, "head_dim_v": p.head_dim_v,
            "mask": {v: k for k, v in N.MASKS.items()}[p.mask], "scale": p.softmax_scale,
            "text": p.text.decode() if p.text else ""}


def _to_framework(torch, x: np.ndarray, spec: Spec):
    t = torch.from_numpy(x)
    dtype = getattr(torch, spec.dtype)
    if spec.device == "cpu" and dtype == torch.float32:
        return t
    dst = torch.empty_strided(t.shape, t.stride(), dtype=dtype, device=spec.device)
    dst.copy_(t)
    return dst


def _to_layout(t, layout: str):
    return t.permute(0, 2, 1, 3) if layout == "bhsd" else t


def _from_layout(t, layout: str):
    return t.permute(0, 2, 1, 3) if layout == "bhsd" else t


def _split(res, want_lse: bool):
    if isinstance(res, (tuple, list)):
        out = res[0]
        lse = res[1] if len(res) > 1 else None
    else:
        out, lse = res, None
    return out, lse


def _call(spec: Spec, q, k, v, causal, scale):
    return spec.fn(q, k, v, causal=causal, scale=scale, **spec.kwargs)


def _graph_call(torch, spec: Spec, q, k, v, causal, scale, side: bool):
    # Inputs A: the same shapes and strides, other values (B * 0.5, exact in every float format
    # away from the subnormal range), so a replay that still reads A or A's derived buffers shows.
    static = []
    for x in (q, k, v):
        s = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
        s.copy_(x * 0.5)
        static.append(s)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the capture (JIT, autotuning, plans)
        for _ in range(2):
            _call(spec, *static, causal, scale)
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    capture_stream = torch.cuda.Stream() if side else None
    with torch.cuda.graph(g, stream=capture_stream):
        res = _call(spec, *static, causal, scale)
    out, lse = _split(res, spec.lse)
    out.fill_(float("nan"))
    if lse is not None:
        lse.fill_(float("nan"))
    for s, x in zip(static, (q, k, v)):
        s.copy_(x)
    if side:
        capture_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(capture_stream):
            g.replay()
        torch.cuda.current_stream().wait_stream(capture_stream)
    else:
        g.replay()
    torch.cuda.synchronize()
    return res


def _churn(torch, device):
    # Hand NaN-filled blocks of assorted sizes through the caching allocator and free them: the
    # callable's own outputs and workspaces then start as NaN instead of as zeros or old results.
    junk = [torch.full((n,), float("nan"), device=device) for n in (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22)]
    del junk


def args_views(a: N.RunArgs) -> tuple:
    """(problem dict, config, q, k, v, out, lse) of one attest call: numpy views of attest's buffers."""
    p = a.problem.contents
    info = _problem_dict(p)
    info["ragged"] = bool(p.cu_seqlens_q)
    config = a.config.decode() if a.config else ""
    views = [_np_view(t.contents) for t in (a.q, a.k, a.v, a.out)]
    return (info, config, *views, _np_view(a.lse.contents) if a.lse else None)


def invoke(spec: Spec, a: N.RunArgs) -> float:
    """Runs spec.fn on one attest call in this process; returns the seconds spent inside fn."""
    return run_views(spec, *args_views(a))


_INT_VIEW = {2: "int16", 4: "int32", 8: "int64"}


def _bits(torch, x):
    # NaN != NaN: an input guard compares bit patterns, not values (attest injects NaN on purpose).
    return x.view(getattr(torch, _INT_VIEW[x.element_size()])) if x.is_floating_point() else x


def _same_bits(torch, what: str, in_batch, alone, layout) -> None:
    """Raises (a call_path failure of config batch2) unless the batch's second sample has the bits
    of fn's call on that sample alone; indices are logical (bshd for out, [B,H,S] for lse)."""
    if layout is not None:
        in_batch, alone = _from_layout(in_batch, layout), _from_layout(alone, layout)
    if tuple(in_batch.shape) != tuple(alone.shape) or in_batch.dtype != alone.dtype:
        raise RuntimeError(f"batch2: {what} of the second sample is {tuple(in_batch.shape)} {in_batch.dtype} in the "
                           f"batch but {tuple(alone.shape)} {alone.dtype} alone")
    differ = _bits(torch, in_batch.detach()) != _bits(torch, alone.detach())
    n = int(differ.sum())
    if n:
        i = tuple(int(x) for x in differ.nonzero()[0])
        raise RuntimeError(f"batch2: the batch's second sample (another sample, as in CFG) is not fn's own call on it "
                           f"alone: {n} of {differ.numel()} {what} elements differ bitwise; first at {list(i)}: "
                           f"{float(in_batch[i]):.9g} in the batch vs {float(alone[i]):.9g} alone")


def run_views(spec: Spec, p: dict, config: str, qn, kn, vn, outn, lsen) -> float:
    """The call on numpy views (attest's buffers in-process, or the shared buffers of a worker):
    inputs to the framework, fn, the outputs' logical elements written into outn / lsen."""
    torch = _torch()
    mask = p["mask"]
    if mask == "none":
        causal = False
    elif spec.causal == "both":
        causal = "top_left" if mask == "causal_tl" else "bottom_right"
    elif (mask == "causal_tl" and spec.causal == "top_left") or (mask == "causal_br" and spec.causal == "bottom_right"):
        causal = True
    else:
        raise ValueError(f"mask {mask} is not what causal=True means to this callable ({spec.causal})")
    if p.get("ragged"):
        raise ValueError("ragged problems are not supported by the Python bridge")
    scale = float(p["scale"])
    q, k, v = (_to_layout(_to_framework(torch, x, spec), spec.layout) for x in (qn, kn, vn))
    cuda = spec.device.startswith("cuda")
    if config in CUDA_CONFIGS and not cuda:
        raise ValueError(f"config {config} needs a CUDA callable")
    guard = None
    if config == "" and not spec.mutates_inputs:
        guard = [x.clone() for x in (q, k, v)]
    batch = p["batch"]
    second = None
    if config == "contig":
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    elif config == "batch2":
        # A second, different sample (the sequence reversed, and negated q) beside the first.
        seq_dim = 2 if spec.layout == "bhsd" else 1
        second = (-q.flip(seq_dim), k.flip(seq_dim), v.flip(seq_dim))
        q, k, v = (torch.cat([x, y], 0) for x, y in zip((q, k, v), second))
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if config in ("graph", "graph_side"):
        res = _graph_call(torch, spec, q, k, v, causal, scale, side=config == "graph_side")
    elif config == "stream2":
        s2 = torch.cuda.Stream()
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s2):
            res = _call(spec, q, k, v, causal, scale)
        torch.cuda.current_stream().wait_stream(s2)
    else:
        if config == "churn":
            _churn(torch, spec.device)
        res = _call(spec, q, k, v, causal, scale)
    if cuda:
        torch.cuda.synchronize()
    fn_s = time.perf_counter() - t0
    out, lse = _split(res, spec.lse)
    if guard is not None:
        for name, g, x in zip("qkv", guard, (q, k, v)):
            if not torch.equal(_bits(torch, g), _bits(torch, x)):
                raise RuntimeError(f"the callable modified its input {name} in place (declare mutates_inputs=True "
                                   f"to have attest hand it copies)")
    if config == "batch2":
        # Every sample is judged. The first half goes back to attest (call_path holds it to the
        # default call's bits); the second is held here to fn's own call on that sample alone, the
        # same batch-size invariance, so a kernel that contaminates one sample with another (a
        # CFG batch bug) or takes another path for it fails call_path instead of passing unseen.
        alone_out, alone_lse = _split(_call(spec, *second, causal, scale), spec.lse)
        _same_bits(torch, "out", out[batch:], alone_out, spec.layout)
        if lse is not None and alone_lse is not None:
            _same_bits(torch, "lse", lse[batch:], alone_lse, None)
        out = out[:batch]
        lse = lse[:batch] if lse is not None else None
    out = _from_layout(out, spec.layout)
    want = tuple(outn.shape)
    if tuple(out.shape) != want:
        raise ValueError(f"output shape {tuple(out.shape)} in layout {spec.layout} is not {want} (logical bshd)")
    torch.from_numpy(outn).copy_(out.detach().to("cpu", torch.float32))
    if lsen is not None:
        if lse is None:
            raise ValueError("the callable declares lse=True but returned no LSE")
        lse = lse.detach()
        if tuple(lse.shape) != tuple(lsen.shape):
            raise ValueError(f"lse shape {tuple(lse.shape)} is not {tuple(lsen.shape)} ([B,H,S])")
        torch.from_numpy(lsen).copy_(lse.to("cpu", torch.float32))
    return fn_s
