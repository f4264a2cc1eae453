#!/usr/bin/env python3
"""Baseline for bench_gpu_ref64: torch float64 attention, softmax(Q K^T * scale) V, timed with
CUDA events in the same device run.

    python3 torch_fp64_baseline.py OUTDIR [--b 1 --h 24 --s 8192 --t T --d 128 --iters 10]

Writes OUTDIR/torch_fp64.json with the median time and TFLOP/s, counted as bench_gpu_ref64
counts them: 2 * (D + Dv) flops per (query, key) pair per head (no mask). The explicit form
materialises the S x T logits (B*H*S*T*8 bytes: 12.9 GB at the default shape); torch's
scaled_dot_product_attention in float64 (math backend) is timed too, for reference. Inputs are
uniform [-1, 1), as in the C++ bench.
"""
import argparse
import json
import pathlib
import statistics

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--h", type=int, default=24)
    ap.add_argument("--s", type=int, default=8192)
    ap.add_argument("--t", type=int, default=None)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    t = a.t or a.s
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(12345)
    q = torch.rand(a.b, a.h, a.s, a.d, dtype=torch.float64, device=dev, generator=g) * 2 - 1
    k = torch.rand(a.b, a.h, t, a.d, dtype=torch.float64, device=dev, generator=g) * 2 - 1
    v = torch.rand(a.b, a.h, t, a.d, dtype=torch.float64, device=dev, generator=g) * 2 - 1
    scale = a.d ** -0.5

    def explicit():
        return torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale, dim=-1) @ v

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)

    def timed(fn):
        fn()
        torch.cuda.synchronize()
        ms = []
        for _ in range(a.iters):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            torch.cuda.synchronize()
            ms.append(e0.elapsed_time(e1))
        return statistics.median(ms), min(ms)

    flops = 2.0 * (a.d + a.d) * a.b * a.h * a.s * t
    med, best = timed(explicit)
    res = {"bench": "torch.float64.softmax_qkT_v", "problem": f"b{a.b}h{a.h}s{a.s}" + (f"t{t}" if t != a.s else "") + f"d{a.d}",
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev), "iters": a.iters,
           "median_ms": med, "min_ms": best, "tflops": flops / (med * 1e-3) / 1e12}
    try:
        smed, _ = timed(sdpa)
        res["sdpa_median_ms"] = smed
        res["sdpa_tflops"] = flops / (smed * 1e-3) / 1e12
    except RuntimeError as e:  # out of memory or no float64 backend: keep the explicit result
        res["sdpa_error"] = str(e).splitlines()[0]
    out = pathlib.Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "torch_fp64.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
