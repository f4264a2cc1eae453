#!/usr/bin/env python3
"""Seed corpora of the libFuzzer targets (datasets/fuzz/corpus/{npy,safetensors}).

Python standard library only (struct, json), so the seeds do not depend on attest's writers:
npy seeds are the numpy-written fixtures of datasets/fixtures/npy plus hand-broken variants;
safetensors seeds follow the format's specification (8-byte little-endian header length, JSON
header, data section) and include one broken file per validation rule. Rerun after changing:
    python3 datasets/fuzz/make_seeds.py
"""
import json
import pathlib
import shutil
import struct

here = pathlib.Path(__file__).resolve().parent
npy_dir = here / "corpus" / "npy"
st_dir = here / "corpus" / "safetensors"
for d in (npy_dir, st_dir):
    d.mkdir(parents=True, exist_ok=True)

# --- npy: the numpy fixtures, then broken variants of one of them
fixtures = here.parent / "fixtures" / "npy"
for f in sorted(fixtures.glob("*.npy")):
    shutil.copy(f, npy_dir / f.name)
good = (fixtures / "f32_3x5.npy").read_bytes()
header_end = 10 + struct.unpack("<H", good[8:10])[0]
header = good[10:header_end]


def npy_with(new_header):
    return good[:8] + struct.pack("<H", len(new_header)) + new_header + good[header_end:]


broken = {
    "bad_magic.npy": b"\x93NUMPX" + good[6:],
    "version_9.npy": good[:6] + b"\x09\x00" + good[8:],
    "header_past_end.npy": good[:8] + b"\xff\xff" + good[10:],
    "truncated_data.npy": good[:-3],
    "trailing_bytes.npy": good + b"\x00" * 4,
    "shape_overflow.npy": npy_with(header.replace(b"(3, 5)", b"(9999999999999, 9999999999999)")),
    "negative_extent.npy": npy_with(header.replace(b"(3, 5)", b"(-3, 5)")),
    "unknown_key.npy": npy_with(header.replace(b"'shape'", b"'shapf'")),
    "fortran_bool.npy": npy_with(header.replace(b"<f4", b"|b1")),
    "empty.npy": b"",
}
for name, data in broken.items():
    (npy_dir / name).write_bytes(data)


# --- safetensors
def st(header, data=b"", pad=True):
    if isinstance(header, bytes):
        raw = header
    else:
        text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
        raw = text.encode("utf-8")
    if pad:
        raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1,
         "I16": 2, "U16": 2, "I32": 4, "I64": 8, "BOOL": 1}
for dt, n in sizes.items():
    data = bytes((i % 2) if dt == "BOOL" else (i * 37) % 256 for i in range(2 * 3 * n))
    (st_dir / f"valid_{dt.lower()}.safetensors").write_bytes(st({dt.lower(): entry(dt, [2, 3], 0, len(data))}, data))
# A capture-shaped file: q, k, v, out, lse and metadata (tiny).
cap = {"__metadata__": {"recipe": "bf16", "layout": "bshd", "mask": "none", "framework": "seed"}}
off, data = 0, b""
for name, shape, dt in [("q", [1, 4, 2, 8], "BF16"), ("k", [1, 4, 2, 8], "BF16"), ("v", [1, 4, 2, 8], "BF16"),
                        ("out", [1, 4, 2, 8], "BF16"), ("lse", [1, 2, 4], "F32"), ("cu_seqlens_q", [2], "I32")]:
    n = sizes[dt]
    for s in shape:
        n *= s
    cap[name] = entry(dt, shape, off, off + n)
    data += bytes((off + i) % 251 for i in range(n))
    off += n
(st_dir / "capture.safetensors").write_bytes(st(cap, data))
(st_dir / "empty_header.safetensors").write_bytes(st("{}"))
(st_dir / "zero_size.safetensors").write_bytes(st({"z": entry("F32", [0, 4], 0, 0)}))
(st_dir / "scalar.safetensors").write_bytes(st({"s": entry("F64", [], 0, 8)}, b"\x00" * 7 + b"\x40"))
(st_dir / "unpadded.safetensors").write_bytes(st({"a": entry("U8", [3], 0, 3)}, b"abc", pad=False))
bad = {
    "short.safetensors": b"\x05\x00\x00",
    "len_huge.safetensors": struct.pack("<Q", 2**63) + b"{}",
    "len_past_end.safetensors": struct.pack("<Q", 64) + b"{}",
    "not_object.safetensors": st("[]"),
    "bad_json.safetensors": st('{"a":{"dtype":"F32",'),
    "dup_key.safetensors": st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"xy"),
    "deep.safetensors": st('{"a":{"shape":[[[[1]]]]}}'),
    "bad_dtype.safetensors": st({"a": entry("C64", [1], 0, 8)}, b"\x00" * 8),
    "neg_shape.safetensors": st('{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', b"\x00" * 4),
    "overflow_shape.safetensors": st({"a": entry("F64", [2**62, 2**62], 0, 8)}, b"\x00" * 8),
    "bytes_mismatch.safetensors": st({"a": entry("F32", [3], 0, 8)}, b"\x00" * 8),
    "past_data.safetensors": st({"a": entry("F32", [4], 0, 16)}, b"\x00" * 8),
    "overlap.safetensors": st({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, b"\x00" * 12),
    "gap.safetensors": st({"a": entry("F32", [1], 4, 8)}, b"\x00" * 8),
    "trailing.safetensors": st({"a": entry("F32", [1], 0, 4)}, b"\x00" * 8),
    "bool_byte.safetensors": st({"a": entry("BOOL", [2], 0, 2)}, b"\x01\x07"),
    "meta_not_string.safetensors": st('{"__metadata__":{"k":3}}'),
    "unknown_key.safetensors": st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":0}}', b"x"),
    "bad_utf8.safetensors": st(b'{"\xff":1}'),
}
for name, data in bad.items():
    (st_dir / name).write_bytes(data)
print(f"npy seeds: {len(list(npy_dir.iterdir()))}, safetensors seeds: {len(list(st_dir.iterdir()))}")
