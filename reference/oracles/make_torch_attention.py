#!/usr/bin/env python3
"""Oracle vectors for the reference attention (reference/src/attention.cpp), made by PyTorch.

Usage: python3 make_torch_attention.py OUT_DIR     (commit OUT_DIR = reference/oracles/torch)

Needs torch and numpy. Everything is float64 on the CPU (no TF32, no reduced-precision paths):
the attention is torch's own materialised softmax(Q K^T * scale + mask) V, with the mask built as
an explicit boolean matrix from its definition (causal_tl: key j visible iff j <= i; causal_br:
j <= i + T - S), GQA by repeat_interleave of the KV heads, and the LSE by torch.logsumexp.
Fully-masked rows are set to output 0 / LSE -inf (attest's convention; torch's softmax gives NaN).

For each case it writes OUT_DIR/<case>/:
  q.npy [B,S,H,D], k.npy [B,T,Hk,D], v.npy [B,T,Hk,Dv]   float64 inputs, bshd
  out.npy [B,S,H,Dv] float64, lse.npy [B,H,S] float64     torch's results
  meta.json                                               shapes, mask, scale, seed, versions, date
Total size is about 0.7 MB.
"""
import datetime
import hashlib
import json
import math
import os
import platform
import sys

import numpy as np
import torch

# name: (B, H, Hk, S, T, D, Dv, mask, seed, outlier K channels)
CASES = {
    "plain": (1, 2, 2, 64, 64, 32, 32, "none", 1, []),
    "causal_tl_s48_t80": (1, 2, 2, 48, 80, 16, 16, "causal_tl", 2, []),
    "causal_tl_s80_t48": (1, 2, 2, 80, 48, 16, 16, "causal_tl", 3, []),
    "causal_br_s48_t80": (1, 2, 2, 48, 80, 16, 16, "causal_br", 4, []),
    "causal_br_s80_t48": (1, 2, 2, 80, 48, 16, 16, "causal_br", 5, []),  # rows 0..31 fully masked
    "gqa_cross": (1, 4, 2, 40, 72, 32, 24, "none", 6, []),
    # K outlier channels (as in LLM/DiT keys): channels 3, 11 and 29 of K scaled by 50.
    "outlier": (1, 2, 2, 64, 64, 32, 32, "none", 7, [3, 11, 29]),
}


def visible(mask, s, t):
    i = torch.arange(s).unsqueeze(1)
    j = torch.arange(t).unsqueeze(0)
    if mask == "none":
        return torch.ones(s, t, dtype=torch.bool)
    if mask == "causal_tl":
        return j <= i
    if mask == "causal_br":
        return j <= i + (t - s)
    raise ValueError(mask)


def make_case(out_dir, name, spec):
    b, h, hk, s, t, d, dv, mask, seed, outliers = spec
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, s, h, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, t, hk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, t, hk, dv, generator=gen, dtype=torch.float64)
    for c in outliers:
        k[..., c] *= 50.0
    scale = 1.0 / math.sqrt(d)

    qh = q.permute(0, 2, 1, 3)                                         # [B,H,S,D]
    kh = k.permute(0, 2, 1, 3).repeat_interleave(h // hk, dim=1)       # [B,H,T,D], head h -> h // (H/Hk)
    vh = v.permute(0, 2, 1, 3).repeat_interleave(h // hk, dim=1)       # [B,H,T,Dv]
    logits = torch.matmul(qh, kh.transpose(-1, -2)) * scale            # [B,H,S,T]
    vis = visible(mask, s, t)
    logits = logits.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(logits, dim=-1)                              # [B,H,S]
    p = torch.softmax(logits, dim=-1)
    any_visible = vis.any(dim=-1)                                      # [S]
    p = torch.where(any_visible.view(1, 1, s, 1), p, torch.zeros_like(p))
    out = torch.matmul(p, vh).permute(0, 2, 1, 3).contiguous()          # [B,S,H,Dv]
    lse = torch.where(any_visible.view(1, 1, s), lse, torch.full_like(lse, float("-inf")))

    case_dir = os.path.join(out_dir, name)
    os.makedirs(case_dir, exist_ok=True)
    for fname, x in (("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse)):
        np.save(os.path.join(case_dir, fname + ".npy"), x.numpy().astype("<f8"))
    with open(__file__, "rb") as f:
        script_sha = hashlib.sha256(f.read()).hexdigest()
    meta = {
        "case": name,
        "batch": b, "heads_q": h, "heads_kv": hk, "seqlen_q": s, "seqlen_kv": t,
        "head_dim": d, "head_dim_v": dv, "mask": mask, "scale": scale,
        "layout": "bshd", "seed": seed, "k_outlier_channels": outliers,
        "generator": "torch.Generator().manual_seed(seed); randn float64 for q, k, v in that order",
        "method": "float64 CPU: softmax(matmul(q, k^T) * scale, explicit mask) @ v; lse = logsumexp",
        "torch_version": torch.__version__, "numpy_version": np.__version__,
        "python": platform.python_version(), "machine": platform.machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "script": "reference/oracles/make_torch_attention.py", "script_sha256": script_sha,
    }
    with open(os.path.join(case_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_torch_attention.py OUT_DIR")
    torch.set_num_threads(1)  # fixed summation order inside torch's CPU kernels
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name, spec in CASES.items():
        make_case(out_dir, name, spec)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out_dir) for f in fs)
    print(f"wrote {len(CASES)} cases to {out_dir} ({total} bytes)")


if __name__ == "__main__":
    main()
