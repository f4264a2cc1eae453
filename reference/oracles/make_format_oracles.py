#!/usr/bin/env python3
"""Oracle vectors for the element format codecs (reference/src/formats.cpp).

Usage: python3 make_format_oracles.py OUT_DIR      (commit OUT_DIR = reference/oracles/formats)

Needs numpy and ml_dtypes; torch is optional (its FP8 casts are recorded when present, on CPU and,
when a GPU is visible, on CUDA). Writes, all little-endian .npy:
  inputs_f32.npy                 float32[N]: the encode inputs (boundaries, ties, their float32
                                 neighbours, subnormals, +-0, +-Inf, NaNs, then seeded random)
  mld_encode_<fmt>.npy           codes of ml_dtypes' cast of every input (uint8; uint16 for bf16/fp16);
                                 int8 = numpy rint + clip to [-128, 127], NaN -> 0
  mld_decode_<fmt>.npy           float32 value of every code 0 .. 2^bits - 1 (ml_dtypes)
  inputs_e8m0_f32.npy            float32[M]: dense e8m0fnu inputs: every 2^e and 1.5 * 2^e (the ties)
                                 for e in [-149, 128] with their float32 neighbours, all FP32
                                 subnormals at a stride of 512 and every pattern within 64 of
                                 2^-127 and 1.5 * 2^-127, +-0, +-Inf, NaNs, +-max; both signs
  mld_encode_e8m0fnu_dense.npy   ml_dtypes codes of inputs_e8m0_f32
  torch_<dev>_encode_<fmt>.npy   codes of torch's `.to(torch.float8_*)` for the four FP8 formats
  provenance.json                library versions, date, device, this script's sha256, file list
<fmt> uses attest's names (fp8_e4m3fn, ...). Total size is about 1.3 MB.
"""
import datetime
import hashlib
import json
import os
import platform
import sys

import numpy as np
import ml_dtypes

N_INPUTS = 32768
SEED = 20240611

# attest name -> (ml_dtypes type or None for int8, bits)
FORMATS = {
    "bf16": (ml_dtypes.bfloat16, 16),
    "fp16": (np.float16, 16),
    "fp8_e4m3fn": (ml_dtypes.float8_e4m3fn, 8),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, 8),
    "fp8_e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 8),
    "fp8_e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 8),
    "fp6_e2m3fn": (ml_dtypes.float6_e2m3fn, 6),
    "fp6_e3m2fn": (ml_dtypes.float6_e3m2fn, 6),
    "fp4_e2m1fn": (ml_dtypes.float4_e2m1fn, 4),
    "e8m0fnu": (ml_dtypes.float8_e8m0fnu, 8),
    "int8": (None, 8),
}


def code_dtype(bits):
    return np.uint16 if bits > 8 else np.uint8


def decode_all(name):
    t, bits = FORMATS[name]
    codes = np.arange(1 << bits, dtype=code_dtype(bits))
    if t is None:
        return codes.astype(np.uint8).view(np.int8).astype(np.float32)
    if bits > 8:
        return codes.view(t).astype(np.float32)
    return codes.astype(np.uint8).view(t).astype(np.float32)


def encode(name, x):
    t, bits = FORMATS[name]
    if t is None:
        with np.errstate(invalid="ignore"):
            r = np.clip(np.rint(np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf)), -128, 127)
        return r.astype(np.int8).view(np.uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(t)
    return y.view(code_dtype(bits)) if bits > 8 else y.view(np.uint8)


def boundary_inputs():
    exact, ties = [], []
    for name in FORMATS:
        v = decode_all(name).astype(np.float64)
        v = np.unique(v[np.isfinite(v)])
        if v.size > 4096:  # bf16 / fp16: a sample of the codes, extremes always included
            v = np.unique(np.concatenate([v[::257], v[:32], v[-32:]]))
        top, ulp = v[-1], v[-1] - v[-2]
        exact.append(v)
        # midpoints (exact ties), and the overflow boundary: max + ulp/2, max + ulp, beyond
        ties.append((v[:-1] + v[1:]) / 2)
        ties.append(np.array([top + ulp / 2, top + ulp, top * 2, top * 4]))
    with np.errstate(over="ignore"):
        e = np.concatenate(exact).astype(np.float32)
        t = np.concatenate(ties).astype(np.float32)  # exact where finite: ties have <= 12 bits
    def with_neighbours(a):
        return np.concatenate([a, np.nextafter(a, np.float32(np.inf)), np.nextafter(a, np.float32(-np.inf))])
    allv = np.concatenate([with_neighbours(e), with_neighbours(t)])
    allv = np.concatenate([allv, -allv])
    fi = np.finfo(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, fi.max, -fi.max, fi.tiny,
                        fi.smallest_subnormal, -fi.smallest_subnormal, 1.0, -1.0, 0.5, 1.5, 3.0, 6.0],
                       dtype=np.float32)
    nan_payload = np.array([0x7FC00001, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF],
                           dtype=np.uint32).view(np.float32)
    out = np.concatenate([special, nan_payload, allv])
    # unique by bit pattern, first occurrence order kept
    _, idx = np.unique(out.view(np.uint32), return_index=True)
    return out[np.sort(idx)]


def e8m0_dense_inputs():
    f = np.float32
    p = np.array([2.0 ** e for e in range(-149, 129)] + [1.5 * 2.0 ** e for e in range(-149, 128)])
    with np.errstate(over="ignore"):
        p = p.astype(f)
    p = np.concatenate([p, np.nextafter(p, f(np.inf)), np.nextafter(p, f(0))])
    sub = np.arange(0, 1 << 23, 512, dtype=np.uint32)
    near = np.concatenate([np.arange(c - 64, c + 65, dtype=np.uint32) for c in (0x400000, 0x600000)])
    fi = np.finfo(f)
    special = np.array([0.0, np.inf, np.nan, fi.max, fi.tiny, fi.smallest_subnormal], dtype=f)
    out = np.concatenate([special, p, sub.view(f), near.view(f)])
    out = np.concatenate([out, -out])
    _, idx = np.unique(out.view(np.uint32), return_index=True)
    return out[np.sort(idx)]


def random_inputs(n):
    rng = np.random.default_rng(SEED)
    mag = 10.0 ** rng.uniform(-12, 12, size=n)          # log-uniform magnitudes
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    a = (sign * mag).astype(np.float32)
    bits = rng.integers(0, 1 << 32, size=n // 4, dtype=np.uint64).astype(np.uint32).view(np.float32)
    out = np.concatenate([a, bits])
    return out[:n]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_format_oracles.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    b = boundary_inputs()
    if b.size >= N_INPUTS:
        sys.exit(f"boundary set has {b.size} values, more than {N_INPUTS}")
    x = np.concatenate([b, random_inputs(N_INPUTS - b.size)]).astype(np.float32)
    assert x.size == N_INPUTS

    files = {}

    def save(fname, arr, what):
        path = os.path.join(out_dir, fname)
        np.save(path, np.ascontiguousarray(arr), allow_pickle=False)
        with open(path, "rb") as fh:
            files[fname] = {"sha256": hashlib.sha256(fh.read()).hexdigest(), "dtype": str(arr.dtype),
                            "shape": list(arr.shape), "what": what}

    save("inputs_f32.npy", x, f"{b.size} boundary/tie/special values, then seeded random (seed {SEED})")
    xe = e8m0_dense_inputs()
    save("inputs_e8m0_f32.npy", xe, "dense e8m0fnu inputs: powers of two, ties, neighbours, subnormals, specials")
    save("mld_encode_e8m0fnu_dense.npy", encode("e8m0fnu", xe), "ml_dtypes cast of inputs_e8m0_f32 to e8m0fnu, codes")
    for name in FORMATS:
        save(f"mld_encode_{name}.npy", encode(name, x), f"ml_dtypes cast of inputs_f32 to {name}, codes")
        save(f"mld_decode_{name}.npy", decode_all(name), f"ml_dtypes value of every {name} code")

    torch_info = None
    try:
        import torch
        if not hasattr(torch, "__version__"):  # without torch, ./torch (the attention oracles) imports as a namespace
            raise ImportError("torch")
        torch_info = {"version": torch.__version__, "cuda": None}
        tmap = {"fp8_e4m3fn": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2,
                "fp8_e4m3fnuz": torch.float8_e4m3fnuz, "fp8_e5m2fnuz": torch.float8_e5m2fnuz}
        devs = ["cpu"]
        if torch.cuda.is_available():
            devs.append("cuda")
            torch_info["cuda"] = {"device": torch.cuda.get_device_name(0), "runtime": torch.version.cuda}
        tx = torch.from_numpy(x.copy())
        for dev in devs:
            for name, td in tmap.items():
                y = tx.to(dev).to(td).view(torch.uint8).cpu().numpy()
                save(f"torch_{dev}_encode_{name}.npy", y, f"torch {dev} tensor.to({td}) of inputs_f32, codes")
    except ImportError:
        pass

    # A run without torch (or without a GPU) keeps the torch vectors of an earlier run when they were made from the
    # same inputs_f32 (same sha256), with that run's provenance; otherwise they are removed.
    carried = None
    old_prov = os.path.join(out_dir, "provenance.json")
    if os.path.exists(old_prov):
        with open(old_prov) as fh:
            old = json.load(fh)
        same_inputs = old.get("files", {}).get("inputs_f32.npy", {}).get("sha256") == files["inputs_f32.npy"]["sha256"]
        kept = {k: v for k, v in old.get("files", {}).items()
                if k.startswith("torch_") and k not in files and os.path.exists(os.path.join(out_dir, k))}
        if kept and same_inputs:
            files.update(kept)
            carried = {"files": sorted(kept), "date_utc": old.get("date_utc"), "torch": old.get("torch"),
                       "why": "made by an earlier run (with torch, on a GPU machine) from the same inputs_f32.npy"}
        else:
            for k in kept:
                os.remove(os.path.join(out_dir, k))

    with open(os.path.abspath(__file__), "rb") as fh:
        script_sha = hashlib.sha256(fh.read()).hexdigest()
    prov = {
        "generator": "reference/oracles/make_format_oracles.py",
        "generator_sha256": script_sha,
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "torch": torch_info,
        "carried_over": carried,
        "n_inputs": int(N_INPUTS),
        "n_boundary_inputs": int(b.size),
        "int8_rule": "np.clip(np.rint(x), -128, 127), NaN -> 0",
        "files": files,
    }
    with open(os.path.join(out_dir, "provenance.json"), "w") as fh:
        json.dump(prov, fh, indent=1, sort_keys=True)
        fh.write("\n")
    total = sum(os.path.getsize(os.path.join(out_dir, f)) for f in files)
    print(f"wrote {len(files)} files, {total} bytes, to {out_dir}")


if __name__ == "__main__":
    main()
