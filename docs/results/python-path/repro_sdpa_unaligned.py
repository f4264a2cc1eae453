"""torch-only repro (no attest): torch.nn.functional.scaled_dot_product_attention on CUDA given q, k, v
whose rows are not 16-byte aligned, and given V scaled into the subnormal range, per SDPA backend.

What attest's gate fed torch SDPA when it failed `layout` and `accuracy ...:layout=strided:pad=5`
(docs/results/python-path/python_path.json): a [B, S, H, D + pad] buffer sliced to D, handed over
as the bhsd view (permute(0, 2, 1, 3)), so every head row starts (D + pad) * itemsize bytes after
the previous one. The same values made contiguous are the control; an FP64 computation of those
values is the reference. Each (backend, dtype) runs in a process of its own (a misaligned-address
fault ends a process's CUDA context). Prints one JSON object; exit 0 whatever it finds (it
reports, not judges).

  python3 repro_sdpa_unaligned.py [out.json]
"""
from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH", None)  # None: default dispatch


def padded(x: torch.Tensor, pad: int) -> torch.Tensor:
    """bhsd x as a bhsd view of a bshd buffer whose rows are D + pad elements apart."""
    b, h, s, d = x.shape
    buf = torch.zeros(b, s, h, d + pad, dtype=x.dtype, device=x.device)
    buf[..., :d] = x.permute(0, 2, 1, 3)
    return buf[..., :d].permute(0, 2, 1, 3)


def ref64(q, k, v, scale):
    p = torch.softmax((q.double() @ k.double().transpose(-1, -2)) * scale, -1)
    return p @ v.double()


def call(backend, q, k, v, scale):
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, scale=scale)
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(q, k, v, scale=scale)


def one(backend, dtype, shape, pad, which):
    g = torch.Generator(device="cpu").manual_seed(7)
    b, h, s, d = shape
    q, k, v = (torch.randn(b, h, s, d, generator=g).to("cuda", dtype) for _ in range(3))
    scale = d ** -0.5
    args = {"q": q, "k": k, "v": v}
    for name in which:
        args[name] = padded(args[name], pad)
    row = {"backend": backend or "default", "dtype": str(dtype).replace("torch.", ""), "shape": list(shape), "pad": pad,
           "padded": "".join(which), "q_strides": list(args["q"].stride())}
    try:
        got = call(backend, args["q"], args["k"], args["v"], scale)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 (a refusal is an answer)
        row["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        return row
    ctl = call(backend, q, k, v, scale)
    r = ref64(q, k, v, scale)
    row["differ_from_contiguous"] = int((got != ctl).sum())
    row["of"] = got.numel()
    row["max_abs_vs_fp64"] = float((got.double() - r).abs().max())
    row["contiguous_max_abs_vs_fp64"] = float((ctl.double() - r).abs().max())
    return row


def subnormal(backend, dtype):
    g = torch.Generator(device="cpu").manual_seed(3)
    q, k, v = (torch.randn(1, 2, 64, 64, generator=g) for _ in range(3))
    q, k = q.to("cuda", dtype), k.to("cuda", dtype)
    vs = (v * 2.0 ** -130).to("cuda", dtype)
    row = {"backend": backend or "default", "dtype": str(dtype).replace("torch.", ""),
           "v_nonzero": int((vs != 0).sum()), "v_of": vs.numel()}
    try:
        out = call(backend, q, k, vs, 0.125)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        row["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        return row
    r = ref64(q, k, vs, 0.125)
    big = r.abs() >= 2.0 ** -132  # twice bf16's smallest subnormal: survives the output rounding
    row["outputs_ge_2^-132"] = int(big.sum())
    row["flushed_to_zero"] = int(((out == 0) & big).sum())
    return row


def child(backend, dtype) -> dict:
    """One backend and dtype, in this process: every case, then the subnormal call."""
    dt = getattr(torch, dtype)
    be = None if backend == "default" else backend
    rows = [one(be, dt, shape, pad, which) for shape, pad, which in
            (((1, 2, 64, 64), 3, "q"), ((1, 2, 64, 64), 3, "qkv"), ((1, 2, 48, 48), 5, "qkv"), ((1, 2, 64, 64), 8, "qkv"))]
    torch.cuda.synchronize()  # an asynchronous fault of the calls above surfaces here, not later
    return {"unaligned": rows, "subnormal": subnormal(be, dt)}


def main() -> int:
    """Each (backend, dtype) in a process of its own: a CUDA fault (misaligned address) ends its
    process's context for good, and must not void the others."""
    import subprocess  # noqa: PLC0415

    res = {"torch": torch.__version__, "card": torch.cuda.get_device_name(), "cudnn": torch.backends.cudnn.version(),
           "runs": []}
    for dtype in ("bfloat16", "float16"):
        for backend in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH", "default"):
            p = subprocess.run([sys.executable, __file__, "--child", backend, dtype], capture_output=True, text=True,
                               timeout=120)
            run = {"backend": backend, "dtype": dtype, "exit_code": p.returncode}
            try:
                run.update(json.loads(p.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                err = [line for line in p.stderr.splitlines() if "Error" in line]
                run["died"] = (err[-1] if err else p.stderr[-300:]).strip()
            res["runs"].append(run)
    text = json.dumps(res, indent=1)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    sys.exit(main())
