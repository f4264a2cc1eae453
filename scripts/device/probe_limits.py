"""Two probes that settle a declaration each (issues 25, 27), with torch and the library alone:

  cudnn   which problem sizes cuDNN's FP8 SDPA forward (nvidia-cudnn-frontend sdpa_fp8, the backend
          that torch carries) refuses on this card: a grid of (s_q, s_kv) x head_dim x mask, each
          graph built and support-checked, refused ones with cuDNN's reason. The gate's FP8 limits
          (fp8_gpu.py static_limits) are declared from this evidence, not found by refusal.
  sage    SageAttention 1.0.6 with kv_len not a multiple of 64: its output against FP64 attention
          over the real keys, and against FP64 attention that also has the last tile's padding
          keys (score 0 after K smoothing, i.e. key = mean(K) in the original space, value 0): if
          the second error is at sage's noise level and the first is not, the padding keys join the
          softmax (findings.md of docs/results/python-gpu).

Writes limits.json and sage_tail.json under --out. Run: scripts/device/probe-limits (carry .whl).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fp8_gpu as F  # noqa: E402  (cudnn_graph, NotSupported: the same graph the gate builds)


def probe_cudnn(out: Path, budget: float = 90) -> dict:
    rows = []
    t0 = time.time()
    grid = [(128, c, s, t) for c in (False, True) for s in (1, 2, 16, 63, 64, 65, 200, 256)
            for t in (1, 2, 16, 63, 64, 65, 200, 256, 777)]
    grid += [(64, False, s, t) for s in (1, 16, 64, 65, 200) for t in (1, 16, 64, 65, 200, 777)]
    for d, causal, s, t in grid:
        if time.time() - t0 > budget:
            break
        key = (1, 2, 2, s, t, d, d, causal, d ** -0.5, F.E4M3, True)
        row = {"d": d, "causal": causal, "s_q": s, "s_kv": t}
        try:
            F.cudnn_graph(key)
            row["ok"] = True
        except F.NotSupported as e:
            row.update(ok=False, why=str(e)[:300])
        except Exception as e:  # noqa: BLE001 -- a crash is recorded as such, never as a limit
            row.update(ok=None, why=f"{type(e).__name__}: {e}"[:300])
        rows.append(row)
    res_complete = len(rows) == len(grid)
    refused = [r for r in rows if r["ok"] is not True]
    res = {"versions": F.cudnn_versions(), "card": torch.cuda.get_device_name(), "rows": rows,
           "refused": [(r["d"], r["causal"], r["s_q"], r["s_kv"]) for r in refused],
           "reasons": sorted({r.get("why", "") for r in refused}), "seconds": round(time.time() - t0, 1),
           "complete": res_complete}
    # Which candidate rule the refusals fit, tested against every row (fp8_gpu.py declares the
    # first that fits; a row whose build crashed fits no rule).
    crashed = any(r["ok"] is None for r in rows)
    res["rules"] = {name: not crashed and all((r["ok"] is False) == rule(r["s_q"], r["s_kv"]) for r in rows)
                    for name, rule in F.LIMIT_RULES.items()}
    (out / "limits.json").write_text(json.dumps(res, indent=1))
    print("cudnn:", len(refused), "of", len(rows), "refused; rules:", res["rules"], flush=True)
    return res


def ref64(q, k, v, scale):
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    return torch.softmax(s, -1) @ v.double()


def probe_sage(out: Path) -> dict:
    from sageattention.core import sageattn  # noqa: PLC0415
    rows = []
    g = torch.Generator(device="cuda").manual_seed(25)
    for t in (777, 832, 200, 256, 65):
        for dist in ("normal", "constant"):
            q = torch.randn(1, 2, 64, 128, device="cuda", generator=g).half()
            k = torch.randn(1, 2, t, 128, device="cuda", generator=g).half()
            if dist == "constant":  # identical keys: constant logits (attest's dist=constant)
                k = k[:, :, :1].expand(-1, -1, t, -1).contiguous()
            v = torch.randn(1, 2, t, 128, device="cuda", generator=g).half()
            scale = 128 ** -0.5
            o = sageattn(q.clone(), k.clone(), v.clone(), tensor_layout="HND", is_causal=False, sm_scale=scale).double()
            pad = -t % 64
            km = k.double().mean(dim=2, keepdim=True)
            kp = torch.cat([k.double(), km.expand(-1, -1, pad, -1)], 2)
            vp = torch.cat([v.double(), torch.zeros(1, 2, pad, 128, device="cuda", dtype=torch.float64)], 2)
            r, rp = ref64(q, k, v, scale), ref64(q, kp, vp, scale)
            err = lambda a, b: float((a - b).abs().max())  # noqa: E731
            rows.append({"T": t, "pad": pad, "dist": dist, "max_abs_vs_fp64": err(o, r),
                         "max_abs_vs_fp64_with_padding_keys": err(o, rp), "ref_max_abs": float(r.abs().max())})
            print("sage", rows[-1], flush=True)
    res = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    (out / "sage_tail.json").write_text(json.dumps(res, indent=1))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", default="sage,cudnn")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for job in a.run.split(","):
        try:
            {"cudnn": probe_cudnn, "sage": probe_sage}[job](out)
        except Exception as e:  # noqa: BLE001
            print(job, "crashed:", type(e).__name__, e, flush=True)
            (out / f"{job}.error.txt").write_text(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
