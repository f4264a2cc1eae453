#!/usr/bin/env python3
"""Write attest captures (docs/capture.md) from Python: numpy only, torch optional.

    from attest_capture import write_capture, CaptureEvery, record_sdpa
    write_capture("layer3.safetensors", q, k, v, out, lse=lse, recipe="bf16", layout="bhsd",
                  framework="torch 2.11", kernel="flash")
    attn = CaptureEvery(my_attention, "captures/", every=100, layout="bshd")   # wraps a function
    with record_sdpa("captures/", every=50):                                    # torch SDPA hook
        model(x)

A capture is one .safetensors file: tensors q, k, v, out (optional lse, cu_seqlens_q,
cu_seqlens_k, q_codes/q_scales, k_codes/k_scales/k_mean, v_codes/v_scales) and string metadata
(recipe, layout, mask, scale, framework, kernel, plus any other key). Arrays may be numpy arrays
or torch tensors (any device; bf16 and float8 tensors are stored as their raw bits with the
safetensors dtype BF16 / F8_E4M3 / F8_E5M2, which numpy cannot represent). Then:
    attest check --capture captures/
"""
import json
import os
import struct

import numpy as np

_NUMPY_DTYPES = {
    np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16",
    np.dtype("int8"): "I8", np.dtype("uint8"): "U8", np.dtype("int16"): "I16", np.dtype("uint16"): "U16",
    np.dtype("int32"): "I32", np.dtype("int64"): "I64", np.dtype("bool"): "BOOL",
}
TENSOR_NAMES = ("q", "k", "v", "out", "lse", "cu_seqlens_q", "cu_seqlens_k", "q_codes", "q_scales",
                "k_codes", "k_scales", "k_mean", "v_codes", "v_scales")


def _as_bytes(x):
    """(safetensors dtype, shape, little-endian C-order bytes) of a numpy array or torch tensor."""
    if type(x).__module__.startswith("torch"):
        import torch
        t = x.detach().to("cpu").contiguous()
        raw = {torch.bfloat16: ("BF16", torch.int16)}
        for name, st in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
            if hasattr(torch, name):
                raw[getattr(torch, name)] = (st, torch.uint8)
        if t.dtype in raw:
            st, view = raw[t.dtype]
            return st, list(t.shape), t.view(view).numpy().tobytes()
        x = t.numpy()
    a = np.ascontiguousarray(np.asarray(x))
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    key = np.dtype(a.dtype.str.replace(">", "<"))
    if key not in _NUMPY_DTYPES:
        raise ValueError(f"dtype {a.dtype} has no safetensors name (valid: {sorted(_NUMPY_DTYPES.values())})")
    return _NUMPY_DTYPES[key], list(a.shape), a.tobytes()


def encode_safetensors(tensors, metadata=None):
    """Bytes of a safetensors file: tensors in the given order, header padded to 8 bytes."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, x in tensors.items():
        dtype, shape, data = _as_bytes(x)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_capture(path, q, k, v, out, lse=None, cu_seqlens_q=None, cu_seqlens_k=None, extra=None, **metadata):
    """Write one capture. `extra` maps further capture tensor names (q_codes, ...) to arrays;
    keyword arguments become metadata (recipe, layout, mask, scale, framework, kernel, ...).
    The file is written to PATH.tmp and renamed, so a crash leaves no partial capture."""
    tensors = {"q": q, "k": k, "v": v, "out": out}
    for name, x in (("lse", lse), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if x is not None:
            tensors[name] = x
    for name, x in (extra or {}).items():
        if name not in TENSOR_NAMES:
            raise ValueError(f"{name!r} is not a capture tensor name (valid: {', '.join(TENSOR_NAMES)})")
        tensors[name] = x
    data = encode_safetensors(tensors, {k: v for k, v in metadata.items() if v is not None})
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


class CaptureEvery:
    """Wraps fn(q, k, v, **kw) -> out or (out, lse); records calls 0, N, 2N, ... as
    FOLDER/PREFIX_<call>.safetensors with the given metadata. Returns fn's result unchanged."""

    def __init__(self, fn, folder, every=1, prefix="call", **metadata):
        self.fn, self.folder, self.every, self.prefix, self.metadata = fn, folder, max(1, int(every)), prefix, metadata
        self.calls = 0
        self.written = []
        os.makedirs(folder, exist_ok=True)

    def __call__(self, q, k, v, *args, **kw):
        result = self.fn(q, k, v, *args, **kw)
        if self.calls % self.every == 0:
            out, lse = (result[0], result[1]) if isinstance(result, tuple) else (result, None)
            path = os.path.join(self.folder, f"{self.prefix}_{self.calls:06d}.safetensors")
            self.written.append(write_capture(path, q, k, v, out, lse=lse, **self.metadata))
        self.calls += 1
        return result


class record_sdpa:
    """Context manager: torch.nn.functional.scaled_dot_product_attention records every Nth call
    (inputs [B, H, S, D]: layout bhsd; is_causal -> mask causal_tl, torch's alignment; scale kept).
    Calls with an attn_mask or dropout are passed through unrecorded (a capture cannot hold them)."""

    def __init__(self, folder, every=1, prefix="sdpa", **metadata):
        self.folder, self.every, self.prefix, self.metadata = folder, max(1, int(every)), prefix, metadata
        self.calls, self.written = 0, []

    def __enter__(self):
        import torch
        import torch.nn.functional as F
        self._F, self._orig = F, F.scaled_dot_product_attention
        os.makedirs(self.folder, exist_ok=True)
        meta = {"framework": f"torch {torch.__version__}", "layout": "bhsd", **self.metadata}

        def wrapped(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
            out = self._orig(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                             scale=scale, **kw)
            if self.calls % self.every == 0 and attn_mask is None and dropout_p == 0.0:
                path = os.path.join(self.folder, f"{self.prefix}_{self.calls:06d}.safetensors")
                m = dict(meta, mask="causal_tl" if is_causal else "none")
                if scale is not None:
                    m["scale"] = repr(float(scale))
                self.written.append(write_capture(path, query, key, value, out, **m))
            self.calls += 1
            return out

        F.scaled_dot_product_attention = wrapped
        return self

    def __exit__(self, *exc):
        self._F.scaled_dot_product_attention = self._orig
        return False


def _selftest(folder):
    """numpy-only honest captures for the C++ tests: float32 attention computed in float64 and
    rounded once (well inside the f32 recipe's budget); bshd and bhsd; one every-2nd wrapper."""
    rng = np.random.default_rng(5)
    B, S, T, H, D = 1, 48, 80, 2, 32

    def attention(q, k, v):  # bshd, float64 math
        s = np.einsum("bshd,bthd->bhst", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(D)
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=-1, keepdims=True)
        o = np.einsum("bhst,bthd->bshd", p / l, v.astype(np.float64))
        return o.astype(np.float32), (m[..., 0] + np.log(l[..., 0])).astype(np.float32)

    os.makedirs(folder, exist_ok=True)
    q, k, v = (rng.standard_normal((B, n, H, D)).astype(np.float32) for n in (S, T, T))
    out, lse = attention(q, k, v)
    write_capture(os.path.join(folder, "numpy_bshd.safetensors"), q, k, v, out, lse=lse, recipe="f32",
                  framework=f"numpy {np.__version__}", kernel="float64 einsum")
    t = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    write_capture(os.path.join(folder, "numpy_bhsd.safetensors"), t(q), t(k), t(v), t(out), recipe="f32", layout="bhsd")
    wrapped = CaptureEvery(attention, folder, every=2, prefix="every2", recipe="f32")
    for _ in range(3):
        wrapped(q, k, v)
    assert [os.path.basename(p) for p in wrapped.written] == ["every2_000000.safetensors", "every2_000002.safetensors"]
    print(f"wrote {2 + len(wrapped.written)} captures to {folder}")


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--selftest":
        _selftest(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
