#!/usr/bin/env python3
"""Exhaustive codec digests: ml_dtypes' cast of ALL 2^32 float32 bit patterns, as crc32 per chunk.

Usage:
  python3 make_codec_digests.py OUT_JSON [--jobs N]
      (commit OUT_JSON = reference/oracles/formats/exhaustive_crc32.json; 11 CPU-minutes, most of
      them numpy's fp16 cast: ~6 min on an idle 2-core machine)
  python3 make_codec_digests.py --chunk FORMAT K [--first N] [--compare CODES.bin]
      prints ml_dtypes' codes for chunk K of FORMAT (input bits K * 2^24 .. (K+1) * 2^24 - 1):
      the first N (default 16), or, with --compare, the first N inputs where the codes in
      CODES.bin (what the C++ test writes on a mismatch: attest's codes of that chunk, raw
      little-endian uint8 / uint16) differ from ml_dtypes'.

The encoders are make_format_oracles.py's (`encode`: ml_dtypes' non-saturating astype for every
format, numpy's clip(rint(x), -128, 127) with NaN -> 0 for int8), so these digests and the sampled
oracle vectors state one semantics. attest's defaults (Rounding::rne, Overflow::ieee) are that
semantics; reference/tests/test_formats_exhaustive.cpp recomputes every chunk with attest's batch
encoder and compares the crc32s (zlib's crc32 on the raw code bytes: uint8 per code, uint16
little-endian for bf16/fp16; sub-byte formats one code per byte, unpacked).

One class is compared after canonicalisation instead of byte for byte (CANONICAL below):
fp16 codes of NaN inputs. numpy keeps the top 10 payload bits of a NaN and does not set the quiet
bit (0x7F800001 -> 0x7C01, 0x7FA00000 -> 0x7D00; whether it does so may depend on numpy's build and
the CPU: F16C quiets), attest emits PyTorch CPU's canonical 0x7E00 / 0xFE00. Both sides map every
fp16 NaN code to 0x7E00 with its sign kept before hashing, so the sign of a NaN must still agree
and every non-NaN code must agree exactly. Every other format is compared byte for byte, NaN
inputs included.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import sys
import zlib
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import ml_dtypes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_format_oracles import FORMATS, encode  # noqa: E402

CHUNK_BITS = 24
N_CHUNKS = 1 << (32 - CHUNK_BITS)
CANONICAL = {
    "fp16": "NaN codes (exponent 31, mantissa != 0) -> 0x7E00 | sign before hashing: numpy keeps "
            "truncated payload bits, attest emits 0x7E00 (PyTorch CPU's canonical NaN)",
}


def chunk_inputs(k):
    return (np.arange(1 << CHUNK_BITS, dtype=np.uint32) + np.uint32(k << CHUNK_BITS)).view(np.float32)


def canonical(name, codes):
    if name == "fp16":
        nan = (codes & 0x7FFF) > 0x7C00
        codes = np.where(nan, (codes & 0x8000) | 0x7E00, codes).astype(np.uint16)
    return codes


def chunk_codes(name, k):
    return canonical(name, encode(name, chunk_inputs(k)))


def chunk_crcs(k):
    return k, {name: zlib.crc32(np.ascontiguousarray(chunk_codes(name, k)).tobytes()) for name in FORMATS}


def make(out_json, jobs):
    crcs = {name: [0] * N_CHUNKS for name in FORMATS}
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        for k, d in ex.map(chunk_crcs, range(N_CHUNKS)):
            for name, c in d.items():
                crcs[name][k] = c
            if k % 32 == 31:
                print(f"chunk {k + 1}/{N_CHUNKS}", file=sys.stderr)
    with open(os.path.abspath(__file__), "rb") as fh:
        script_sha = hashlib.sha256(fh.read()).hexdigest()
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "make_format_oracles.py"), "rb") as fh:
        enc_sha = hashlib.sha256(fh.read()).hexdigest()
    doc = {
        "what": "zlib crc32 of ml_dtypes' codes of every float32 bit pattern, per chunk of 2^24 "
                "consecutive patterns (chunk k = bits k*2^24 .. (k+1)*2^24-1), per format",
        "generator": "reference/oracles/make_codec_digests.py",
        "generator_sha256": script_sha,
        "encoder": "reference/oracles/make_format_oracles.py encode()",
        "encoder_sha256": enc_sha,
        "command": "python3 reference/oracles/make_codec_digests.py " + os.path.relpath(out_json),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "int8_rule": "np.clip(np.rint(x), -128, 127), NaN -> 0 (numpy)",
        "chunk_bits": CHUNK_BITS,
        "code_bytes": "uint8 per code (sub-byte formats unpacked), uint16 little-endian for bf16 and fp16",
        "canonicalised": CANONICAL,
        "crc32": crcs,
    }
    with open(out_json, "w") as fh:
        json.dump(doc, fh, indent=0, sort_keys=True)
        fh.write("\n")
    print(f"wrote {out_json}: {len(FORMATS)} formats x {N_CHUNKS} chunks")


def show_chunk(name, k, first, compare):
    if name not in FORMATS:
        sys.exit(f"unknown format {name} (valid: {', '.join(FORMATS)})")
    if not 0 <= k < N_CHUNKS:
        sys.exit(f"chunk must be in [0, {N_CHUNKS})")
    x = chunk_inputs(k)
    want = chunk_codes(name, k)
    bits = x.view(np.uint32)
    width = 4 if want.dtype == np.uint16 else 2
    print(f"{name} chunk {k}: input bits 0x{int(bits[0]):08X} .. 0x{int(bits[-1]):08X}, crc32 "
          f"{zlib.crc32(want.tobytes())} (ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__})")
    if compare:
        got = np.fromfile(compare, dtype=want.dtype)
        if got.size != want.size:
            sys.exit(f"{compare}: {got.size} codes, expected {want.size}")
        got = canonical(name, got)
        idx = np.flatnonzero(got != want)
        print(f"{idx.size} of {want.size} codes differ")
        for i in idx[:first]:
            print(f"  x=0x{int(bits[i]):08X} ({float(x[i])!r}) ml_dtypes 0x{int(want[i]):0{width}X} "
                  f"attest 0x{int(got[i]):0{width}X}")
        return
    for i in range(min(first, want.size)):
        print(f"  x=0x{int(bits[i]):08X} ({float(x[i])!r}) ml_dtypes 0x{int(want[i]):0{width}X}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_json", nargs="?")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--chunk", nargs=2, metavar=("FORMAT", "K"))
    ap.add_argument("--first", type=int, default=16)
    ap.add_argument("--compare", metavar="CODES.bin")
    a = ap.parse_args()
    if a.chunk:
        show_chunk(a.chunk[0], int(a.chunk[1], 0), a.first, a.compare)
    elif a.out_json:
        make(a.out_json, a.jobs)
    else:
        ap.error("give OUT_JSON or --chunk FORMAT K")


if __name__ == "__main__":
    with np.errstate(all="ignore"):
        main()
