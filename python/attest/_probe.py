"""attest.probe: a kernel's limits learned by calling it, each declaration with its evidence.

A user who does not know a kernel's limits would otherwise learn them from failed refusal rows.
The probe makes a few small calls in the declared layout, dtype and device and turns what the
kernel did into gate() keywords:

  gqa, head_dim_v, cross, causal_cross, head_dims   a call of that shape raised (the message is
                                                    the evidence)
  ftz        outputs that FP64 puts at >= 2^-132 came back 0 (V scaled by 2^-130, as the
             subnormal check feeds it)
  accept     {"nonfinite": ...}: a NaN in V at key 5, causally masked from query row 0, made
             row 0 NaN (the NaN policy the nonfinite check holds kernels to)
  min_alignment  16: a call on rows of 65 elements (not a multiple of 16 bytes) raised, killed
             the process (fused kernels load 16-byte vectors), or returned other bits than the
             same call on contiguous copies without a word (a defect: the evidence says so, and
             the declaration keeps the gate from feeding such rows; the layout check holds a
             kernel to the same bits on every layout it accepts)

The calls run in a throw-away process started as the gate's workers are (_worker.start_method):
the caller never touches the device on the probe's behalf, and the alignment call, which may
fault the device, runs last in a process of its own.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import _call as C
from . import _native as N
from . import _worker as W

HEAD_DIMS = (32, 48, 64, 96, 128)  # the head dims of attest's case sets
NAN_LEAK = ("a NaN in V at a key causally masked from query row 0 makes row 0 NaN "
            "(found by attest.probe; check whether the kernel's NaN policy is what you want)")


@dataclass
class Probe(Mapping):
    """gate() / pair() keywords (`attest.gate(fn, **p)`, `pair(a, b, declared_a=dict(p))`) and,
    for each declaration the probe made, what it saw."""

    declarations: dict
    evidence: dict = field(default_factory=dict)

    def __getitem__(self, key):
        return self.declarations[key]

    def __iter__(self):
        return iter(self.declarations)

    def __len__(self):
        return len(self.declarations)

    def markdown(self) -> str:
        rows = ["| declaration | value | evidence |", "|---|---|---|"]
        rows += [f"| {k} | {self.declarations.get(k)!r} | {why} |" for k, why in self.evidence.items()]
        return "\n".join(rows) + "\n"


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def _limits(spec) -> dict:
    """The probe calls (in the probe process): refusals, subnormal flush, NaN behind a mask."""
    torch = C._torch()
    g = torch.Generator().manual_seed(1)
    dtype = getattr(torch, spec.dtype)

    def call(q, k, v, causal=False):
        # q, k, v: float32 bhsd on the host; fn gets its dtype, device and layout.
        to = lambda x: x.to(spec.device, dtype) if spec.layout == "bhsd" else x.to(spec.device, dtype).transpose(1, 2)  # noqa: E731
        arg = ("top_left" if spec.causal == "both" else True) if causal else False
        out, _ = C._split(C._call(spec, to(q), to(k), to(v), arg, 1 / math.sqrt(q.shape[-1])), spec.lse)
        out = out if spec.layout == "bhsd" else out.transpose(1, 2)
        return out.detach().to("cpu", torch.float64)

    def rand(b, h, hk, s, t, d, dv):
        return (torch.randn(b, h, s, d, generator=g), torch.randn(b, hk, t, d, generator=g),
                torch.randn(b, hk, t, dv, generator=g))

    def tries(*shape, causal=False):
        try:
            call(*rand(*shape), causal=causal)
            return None
        except Exception as e:  # noqa: BLE001 (what it raises is the evidence)
            return _first_line(e)

    got = {"refused": {"gqa": tries(1, 4, 2, 64, 64, 64, 64), "head_dim_v": tries(1, 2, 2, 64, 64, 64, 32),
                       "cross": tries(1, 2, 2, 64, 96, 64, 64), "causal_cross": tries(1, 2, 2, 64, 96, 64, 64, causal=True)},
           "head_dims": {d: tries(1, 2, 2, 64, 64, d, d) for d in HEAD_DIMS}}
    q, k, v = rand(1, 2, 2, 64, 64, 64, 64)
    # Subnormal outputs (float32 and bf16 keep 2^-130; fp16 rounds it to zero: nothing to probe).
    if spec.dtype != "float16":
        vs = (v * 2.0 ** -130).to(dtype)
        ref = torch.softmax((q.to(dtype).double() @ k.to(dtype).double().transpose(-1, -2)) / 8.0, -1) @ vs.double()
        out = call(q, k, vs.float())
        # Outputs are weighted means of V: mostly below 2^-130 themselves. 2^-132 is twice bf16's
        # smallest subnormal (2^-133), so every output counted here survives the output rounding;
        # a threshold at 2^-128 counted almost none, and a flushing kernel went undeclared.
        big = ref.abs() >= 2.0 ** -132
        got["flushed"] = (int(((out == 0) & big).sum()), int(big.sum()))
    if any(m in spec.masks for m in ("causal_tl", "causal_br")):  # S = T: both conventions agree
        vn = v.clone()
        vn[0, 0, 5] = float("nan")
        got["nan_row0"] = bool(torch.isnan(call(q, k, vn, causal=True)[0, 0, 0]).any())
    return got


def _unaligned(spec) -> dict:
    """One call on q, k, v whose rows are 65 elements apart (130 or 260 bytes: no 16-byte row),
    then the same values made contiguous: {"differ": elements whose bits differ, "of": count}."""
    torch = C._torch()
    g = torch.Generator().manual_seed(2)
    views = []
    for _ in range(3):  # bhsd [1, 2, 64, 64] inside a [1, 2, 64, 65] buffer
        buf = torch.randn(1, 2, 64, 65, generator=g).to(spec.device, getattr(torch, spec.dtype))
        views.append(buf[..., :64] if spec.layout == "bhsd" else buf[..., :64].transpose(1, 2))
    got, _ = C._split(C._call(spec, *views, False, 0.125), spec.lse)
    if spec.device.startswith("cuda"):
        torch.cuda.synchronize()
    got = got.detach().clone()
    ctl, _ = C._split(C._call(spec, *(x.contiguous() for x in views), False, 0.125), spec.lse)
    differ = C._bits(torch, got) != C._bits(torch, ctl.detach())
    return {"differ": int(differ.sum()), "of": differ.numel()}


def _child(conn, spec, what: str) -> None:
    try:
        if isinstance(spec, bytes):
            spec = pickle.loads(spec)
        # A forked child has the parent's OpenMP state without its threads (as in _worker._serve).
        C._torch().set_num_threads(1)
        if what == "limits":
            conn.send({"ok": _limits(spec)})
        else:
            conn.send({"ok": _unaligned(spec)})
    except BaseException as e:  # noqa: BLE001
        conn.send({"error": _first_line(e)})


def _in_child(spec, what: str, timeout: float) -> dict:
    """{"ok": ...} | {"error": text} | {"died": how}, from one probe process."""
    method = W.start_method()
    ctx = mp.get_context(method)
    payload = spec if method == "fork" else W._payload(spec)
    a, b = ctx.Pipe()
    p = ctx.Process(target=_child, args=(b, payload, what), daemon=True, name="attest-probe")
    p.start()
    b.close()
    try:
        got = a.recv() if a.poll(timeout) else {"died": f"no answer within {timeout:g} s"}
    except (EOFError, OSError):
        p.join(5)
        code = p.exitcode
        got = {"died": W._signal_name(code) if code is not None and code < 0 else f"exit code {code}"}
    if p.is_alive():
        p.kill()
    p.join(5)
    a.close()
    return got


def run(spec, given: dict, timeout: float) -> Probe:
    """The probe of a Spec built from `given` (the caller's own declarations, kept in the result)."""
    got = _in_child(spec, "limits", timeout)
    if "ok" not in got:
        raise N.AttestError(f"probe: the probe process for '{spec.name}' "
                            + (f"died ({got['died']})" if "died" in got else f"raised {got['error']}")
                            + " on the limit calls; pass declarations to gate() by hand")
    r = got["ok"]
    decl, why = dict(given), {}
    for cap, err in r["refused"].items():
        if err and not (cap == "causal_cross" and r["refused"]["cross"]):  # no cross at all says it already
            decl[cap] = False
            why[cap] = f"refused: {err}"
    ok_dims = tuple(d for d, e in r["head_dims"].items() if e is None)
    if len(ok_dims) < len(HEAD_DIMS):
        decl["head_dims"] = ok_dims
        why["head_dims"] = "; ".join(f"d={d} refused: {e}" for d, e in r["head_dims"].items() if e)
    if "flushed" in r and r["flushed"][0]:
        decl["ftz"] = True
        why["ftz"] = f"{r['flushed'][0]} of {r['flushed'][1]} outputs >= 2^-132 came back 0 (V scaled by 2^-130)"
    if r.get("nan_row0"):
        decl["accept"] = {**decl.get("accept", {}), "nonfinite": NAN_LEAK}
        why["accept"] = "V[0,0,5] = NaN, causal, S = T = 64: output row 0 (which sees key 0 only) is NaN"
    aligned = _in_child(spec, "alignment", timeout)
    if "ok" not in aligned:
        decl["min_alignment"] = 16
        why["min_alignment"] = "a call on 65-element rows (no 16-byte alignment) " + (
            f"killed the process ({aligned['died']})" if "died" in aligned else f"raised {aligned['error']}")
    elif aligned["ok"]["differ"]:
        # Not a limit but a defect (no error, other values): declared so that the gate judges the
        # kernel where it is right, and said plainly in the evidence the report shows.
        decl["min_alignment"] = 16
        why["min_alignment"] = (f"DEFECT: a call on 65-element rows (no 16-byte alignment) returned other values than the "
                                f"same call on contiguous copies, without an error ({aligned['ok']['differ']} of "
                                f"{aligned['ok']['of']} outputs differ bitwise); declared so such rows are not fed to it")
    return Probe(decl, why)
