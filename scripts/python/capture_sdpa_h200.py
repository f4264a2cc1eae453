#!/usr/bin/env python3
"""Capture torch SDPA on the GPU machine and check the captures with attest (issue 7).

For bf16 and fp16 and each SDPA backend (flash, cuDNN, memory-efficient, math), one call at
B=1, H=--heads, S=T=--seq, D=--dim on the same float32 normal inputs (torch.manual_seed(--seed),
cast to the dtype), captured as safetensors with safetensors.torch.save_file (the reference
implementation, so attest's reader meets an independent writer). The LSE is captured where a
backend's aten op returns one whose output equals the public call's bit for bit. One extra file
written by attest_capture.write_capture is read back with safetensors.numpy.load_file (the numpy
helper checked against the reference reader). Then, with --attest, runs
    attest check --capture DIR --json OUT/sdpa_check.json --markdown OUT/sdpa_check.md
Run on the H200 machine from the repository root:
    python3 scripts/python/capture_sdpa_h200.py --attest PATH/TO/attest --out "$OUT"
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attest_capture import write_capture  # noqa: E402

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def lse_of(backend, q, k, v, out):
    """The backend's LSE [B, H, S] (float32) from its aten op, or (None, why)."""
    aten = torch.ops.aten
    try:
        if backend == "flash":
            r = aten._scaled_dot_product_flash_attention(q, k, v)
        elif backend == "efficient":
            r = aten._scaled_dot_product_efficient_attention(q, k, v, None, True)
        elif backend == "cudnn":
            r = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True)
        else:
            return None, "the math backend returns no LSE"
    except Exception as e:  # signatures move between torch versions
        return None, f"aten op failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    o, lse = r[0], r[1]
    if not torch.equal(o, out):
        return None, "the aten op's output differs from the public call's"
    if lse.dim() == 4 and lse.shape[-1] == 1:
        lse = lse[..., 0]
    B, H, S = q.shape[0], q.shape[1], q.shape[2]
    if lse.dim() != 3 or tuple(lse.shape[:2]) != (B, H) or lse.shape[2] < S:
        return None, f"LSE shape {tuple(lse.shape)} is not [B, H, >=S]"
    return lse.float().contiguous(), "aten op"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attest", help="attest binary; without it only the captures are written")
    ap.add_argument("--out", default=os.environ.get("OUT", "out/sdpa"), help="results folder (default $OUT)")
    ap.add_argument("--captures", default="/tmp/attest_sdpa_captures", help="capture folder (large: not under --out)")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    from safetensors.torch import save_file
    import safetensors

    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.captures, exist_ok=True)
    for f in os.listdir(a.captures):
        if f.endswith(".safetensors"):
            os.remove(os.path.join(a.captures, f))
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    shape = (1, a.heads, a.seq, a.dim)  # SDPA's [B, H, S, D]: layout bhsd
    q32, k32, v32 = (torch.randn(shape, device=dev, dtype=torch.float32) for _ in range(3))
    log = {"torch": torch.__version__, "safetensors": safetensors.__version__, "device": torch.cuda.get_device_name(),
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "shape_bhsd": list(shape),
           "seed": a.seed, "captures": []}
    for dtype, recipe in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        q, k, v = (x.to(dtype) for x in (q32, k32, v32))
        for name, backend in BACKENDS.items():
            entry = {"dtype": recipe, "backend": name}
            try:
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(q, k, v)
                    torch.cuda.synchronize()
                    lse, lse_note = lse_of(name, q, k, v, out)
            except Exception as e:
                entry["skipped"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                log["captures"].append(entry)
                print(f"{recipe} {name}: skipped: {entry['skipped']}", flush=True)
                continue
            tensors = {"q": q, "k": k, "v": v, "out": out}
            if lse is not None:
                tensors["lse"] = lse
            meta = {"recipe": recipe, "layout": "bhsd", "mask": "none", "framework": f"torch {torch.__version__}",
                    "kernel": f"sdpa.{name}"}
            path = os.path.join(a.captures, f"sdpa_{recipe}_{name}.safetensors")
            save_file({n: t.detach().contiguous().cpu() for n, t in tensors.items()}, path, metadata=meta)
            entry.update(file=os.path.basename(path), lse=lse_note)
            log["captures"].append(entry)
            print(f"{recipe} {name}: captured ({lse_note})", flush=True)

    # The numpy helper against the reference reader (a small capture, not checked by attest).
    from safetensors.numpy import load_file
    small = [np.random.default_rng(3).standard_normal((1, 64, 2, 32)).astype(np.float32) for _ in range(4)]
    probe = os.path.join(a.out, "helper_probe.safetensors")
    write_capture(probe, *small, lse=np.zeros((1, 2, 64), np.float32), recipe="f32")
    back = load_file(probe)
    log["helper_vs_safetensors_reader"] = all(np.array_equal(back[n], x) for n, x in zip(("q", "k", "v", "out"), small))
    os.remove(probe)
    print(f"numpy helper file read by safetensors.numpy: equal = {log['helper_vs_safetensors_reader']}", flush=True)

    if a.attest:
        t0 = time.time()
        cmd = [a.attest, "check", "--capture", a.captures, "--json", os.path.join(a.out, "sdpa_check.json"),
               "--markdown", os.path.join(a.out, "sdpa_check.md")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        with open(os.path.join(a.out, "sdpa_check.txt"), "w") as f:
            f.write(f"$ {' '.join(cmd)}\nexit {r.returncode}\n{r.stdout}{r.stderr}")
        log["attest_exit"], log["attest_seconds"] = r.returncode, round(time.time() - t0, 1)
        print(r.stdout + r.stderr, flush=True)
    with open(os.path.join(a.out, "sdpa_capture.json"), "w") as f:
        json.dump(log, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
