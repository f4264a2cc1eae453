"""attest.probe (issue 33): a kernel's limits learned by calling it, so that a user who does not
know them gets declarations (with evidence) instead of failed refusal rows."""
import pytest
import torch

import attest
from conftest import sdpa as torch_sdpa
from test_isolation import sdpa as control  # float64 attention, masked keys still multiply V


def refuses_like_flash(q, k, v, *, causal, scale):
    """Planted limits, the kind a flash kernel has: D == Dv only, no causal mask with S != T, head
    dims 64 and 128 only (bhsd tensors)."""
    if v.shape[-1] != q.shape[-1]:
        raise NotImplementedError("head_dim_v must equal head_dim")
    if causal and q.shape[2] != k.shape[2]:
        raise RuntimeError("No available kernel. Aborting execution.")
    if q.shape[-1] not in (64, 128):
        raise attest.Unsupported(f"no kernel for head_dim {q.shape[-1]}")
    return control(q, k, v, causal=causal, scale=scale)


def leaks_nan_behind_the_mask(kernel, dtype):
    """Whether a NaN in V at key 5 reaches query row 0 under a causal mask (row 0 sees key 0 only),
    asked of the kernel directly."""
    q, k, v = (torch.randn(1, 2, 16, 64, generator=torch.Generator().manual_seed(i)).to(dtype) for i in range(3))
    v[0, 0, 5] = float("nan")
    return bool(torch.isnan(kernel(q, k, v, causal=True, scale=0.125)[0, 0, 0]).any())


def test_probe_finds_planted_limits_and_they_make_smoke_pass():
    res = attest.gate(refuses_like_flash, recipe="f32", dtype="float32", cases="smoke")
    refusals = {r["problem"] for r in res.results if r["check"] == "refusal" and r["verdict"] == "failed"}
    assert not res.passed and len(refusals) >= 3, res.summary  # the limits, undeclared, fail as refusals

    p = attest.probe(refuses_like_flash, recipe="f32", dtype="float32")
    leak = leaks_nan_behind_the_mask(control, torch.float32)
    assert leak  # the control's masked keys multiply V: 0 * NaN
    assert dict(p) == {"dtype": "float32", "head_dim_v": False, "causal_cross": False, "head_dims": (64, 128),
                       "accept": {"nonfinite": attest._probe.NAN_LEAK}}
    assert p.evidence["head_dim_v"] == "refused: NotImplementedError: head_dim_v must equal head_dim"
    assert p.evidence["causal_cross"] == "refused: RuntimeError: No available kernel. Aborting execution."
    assert "d=32 refused: Unsupported: no kernel for head_dim 32" in p.evidence["head_dims"]
    assert "| head_dims | (64, 128) |" in p.markdown()

    res = attest.gate(refuses_like_flash, recipe="f32", cases="smoke", **p)
    assert res.passed, [(r["check"], r["problem"], r["verdict"], r["reason"]) for r in res.failures]
    assert sum(r["verdict"] == "passed" for r in res.results) >= 20
    rc, rows = attest.pair(control, refuses_like_flash, recipe="f32", dtype="float32", declared_b=dict(p))
    assert rc == 0 and not [r for r in rows if r["verdict"] == "failed"]


def test_probe_on_torch_cpu_sdpa_makes_its_smoke_gate_pass():
    p = attest.probe(torch_sdpa, recipe="bf16")
    # What the probe declares is what torch does on this CPU, asked of torch directly: no refusals
    # (GQA, D != Dv, cross, every head dim), the NaN policy, and whether bf16 outputs that FP64
    # puts at 2^-130 survive.
    assert not {"gqa", "head_dim_v", "cross", "causal_cross", "head_dims"} & set(p), p.evidence
    assert ("nonfinite" in p.get("accept", {})) == leaks_nan_behind_the_mask(torch_sdpa, torch.bfloat16)
    q, k, v = (torch.randn(1, 2, 64, 64, generator=torch.Generator().manual_seed(i)).bfloat16() for i in range(3))
    v = (v.float() * 2.0 ** -130).bfloat16()
    out = torch_sdpa(q, k, v, causal=False, scale=0.125)
    ref = torch.softmax(q.double() @ k.double().transpose(-1, -2) * 0.125, -1) @ v.double()
    big = ref.abs() >= 2.0 ** -132
    assert int(big.sum()) > 1000  # the probe's subnormal call has outputs to look at
    assert p.get("ftz", False) == bool(((out == 0) & big).any())
    res = attest.gate(torch_sdpa, recipe="bf16", cases="smoke", **p)
    assert res.passed, [(r["check"], r["problem"], r["verdict"], r["reason"]) for r in res.failures]


def test_probe_input_errors_are_one_line():
    with pytest.raises(attest.AttestError, match="probe: unknown declaration 'masks_'"):
        attest.probe(torch_sdpa, masks_=("none",))


def wrong_on_unaligned_rows(q, k, v, *, causal, scale):
    """A planted defect of the kind torch SDPA shows on CUDA (docs/results/python-path/findings.md):
    no error, other values, when a row of q, k or v is not a multiple of 16 bytes."""
    out = control(q, k, v, causal=causal, scale=scale)
    if any(x.stride(-2) * x.element_size() % 16 for x in (q, k, v)):
        out = out * (1 + 2.0 ** -8)
    return out


def test_probe_names_wrong_values_on_unaligned_rows_a_defect():
    res = attest.gate(wrong_on_unaligned_rows, recipe="f32", dtype="float32", cases="smoke")
    assert not res.passed and any(r["check"] == "layout" for r in res.failures), res.summary

    p = attest.probe(wrong_on_unaligned_rows, recipe="f32", dtype="float32")
    assert p["min_alignment"] == 16
    assert p.evidence["min_alignment"].startswith("DEFECT: ") and "without an error" in p.evidence["min_alignment"]
    # The contiguous copies of the same values: the control's bits, so the probe saw exactly the
    # rows the planted defect changes (every output of the 2 x 64 x 64 call).
    assert "8192 of 8192 outputs differ" in p.evidence["min_alignment"]
    res = attest.gate(wrong_on_unaligned_rows, recipe="f32", cases="smoke", **p)
    assert res.passed, [(r["check"], r["problem"], r["verdict"], r["reason"]) for r in res.failures]
    assert "row_align=4" in res.summary  # 16 bytes of float32, shown on the coverage line


def test_probe_declares_no_alignment_for_a_kernel_right_on_any_rows():
    assert "min_alignment" not in attest.probe(control, recipe="f32", dtype="float32")


def flushes_subnormal_outputs(q, k, v, *, causal, scale):
    """A planted flush-to-zero kernel: outputs below float32's normal range written as 0."""
    out = control(q, k, v, causal=causal, scale=scale)
    return torch.where(out.abs() < 2.0 ** -126, torch.zeros_like(out), out)


def test_probe_declares_ftz_for_a_kernel_that_flushes_subnormal_outputs():
    p = attest.probe(flushes_subnormal_outputs, recipe="bf16")
    assert p.get("ftz") is True, p.evidence
    res = attest.gate(flushes_subnormal_outputs, recipe="bf16", cases="smoke", check="subnormal")
    assert not res.passed  # undeclared, the flush fails the subnormal check
    res = attest.gate(flushes_subnormal_outputs, recipe="bf16", cases="smoke", check="subnormal", **p)
    assert res.passed, [(r["check"], r["problem"], r["verdict"], r["reason"]) for r in res.failures]
