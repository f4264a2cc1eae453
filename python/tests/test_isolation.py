"""Verdicts a user can trust (issue 25) on the CPU: fault containment in worker processes, the
NaN-safe input guard, one row per refusal, declarations (ftz, min_alignment, causal_cross) and
independent q/k/v layouts. The control kernel is attention in float64 (bits independent of
strides and CPU); the planted bugs are wrappers around it, each asserting attest's conclusion about
what the wrapper did."""
import os
import time

import torch

import attest


def sdpa(q, k, v, *, causal, scale):
    """The correct control kernel of these tests: attention in float64 on contiguous copies, cast to
    the input dtype. Its bits do not depend on strides or batch size on any CPU (torch's own CPU
    SDPA may pick another microkernel per stride), so the tests assert attest's machinery, not a
    property of one CPU."""
    q64, k64, v64 = (x.double().contiguous() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    if g > 1:
        k64, v64 = k64.repeat_interleave(g, 1), v64.repeat_interleave(g, 1)
    s = (q64 @ k64.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ v64).to(q.dtype)

OK = ("passed", "unsupported")
# Checks the control kernel passes under the f32 recipe (nonfinite judges its NaN policy, tested
# separately below).
CHECKS = "accuracy,determinism,call_path,layout,poison,refusal"


def rows(res, verdict=None, check=None):
    return [r for r in res.results if (verdict is None or r["verdict"] == verdict) and (check is None or r["check"] == check)]


def is_target(q, k):  # the smoke case b1h2s72t136d128 (bhsd tensors: [B, H, S, D])
    return q.shape[2] == 72 and k.shape[2] == 136


def aborts_on_one_shape(q, k, v, *, causal, scale):
    if is_target(q, k):
        os.abort()  # takes the whole process down, as a segfault or a sticky device error would
    return sdpa(q, k, v, causal=causal, scale=scale)


def test_control_passes():
    res = attest.gate(sdpa, recipe="f32", dtype="float32", check=CHECKS)
    assert res.passed, res.summary
    assert len(res.report["workers"]) == 1 and res.report["workers"][0]["ended"] == "end of gate"


def test_abort_on_one_shape_is_one_fault_row_and_the_gate_goes_on():
    res = attest.gate(aborts_on_one_shape, recipe="f32", dtype="float32", check=CHECKS)
    faults = rows(res, "fault")
    assert len(faults) == 1, [(r["check"], r["problem"], r["reason"]) for r in faults]
    assert faults[0]["problem"].startswith("b1h2s72t136d128") and "SIGABRT" in faults[0]["reason"]
    others = [r for r in res.results if r is not faults[0]]
    assert all(r["verdict"] in OK for r in others), [(r["check"], r["problem"], r["verdict"], r["reason"])
                                                     for r in others if r["verdict"] not in OK]
    # Every other case was judged, after the fault too: as many passes as the control minus that case.
    assert sum(r["verdict"] == "passed" and not r["problem"].startswith("b1h2s72t136d128") for r in others) >= 20
    workers = res.report["workers"]
    assert len(workers) == 2 and "died (SIGABRT)" in workers[0]["ended"], workers
    assert "Worker processes" in res.markdown
    assert not res.passed


def hangs_on_one_shape(q, k, v, *, causal, scale):
    if is_target(q, k):
        time.sleep(60)
    return sdpa(q, k, v, causal=causal, scale=scale)


def test_hang_past_the_call_timeout_is_one_fault_row():
    res = attest.gate(hangs_on_one_shape, recipe="f32", dtype="float32", check="accuracy,determinism", call_timeout=5)
    faults = rows(res, "fault")
    assert len(faults) == 1 and "hang" in faults[0]["reason"] and "5 s" in faults[0]["reason"]
    assert all(r["verdict"] in OK for r in res.results if r is not faults[0])


def test_nan_inputs_are_no_in_place_modification():
    # attest injects NaN into q/k/v on purpose (nonfinite): a value comparison (NaN != NaN) would
    # accuse every correct kernel of modifying its inputs; the guard compares bits.
    res = attest.gate(sdpa, recipe="f32", dtype="float32", check="nonfinite")
    assert not [r for r in res.results if "modified its input" in r["reason"]]
    assert rows(res, "passed", "nonfinite")


def modifies_q(q, k, v, *, causal, scale):
    out = sdpa(q, k, v, causal=causal, scale=scale)
    q[..., 0] += 1.0
    return out


def test_in_place_modification_is_caught():
    res = attest.gate(modifies_q, recipe="f32", dtype="float32", check="accuracy")
    assert rows(res, "error") and all("modified its input q" in r["reason"] for r in rows(res, "error"))


def refuses_causal_cross(q, k, v, *, causal, scale):
    if causal and q.shape[2] != k.shape[2]:
        raise RuntimeError("No available kernel. Aborting execution.")  # what torch's flash backend says
    return sdpa(q, k, v, causal=causal, scale=scale)


def test_one_refusal_is_one_refusal_row():
    res = attest.gate(refuses_causal_cross, recipe="f32", dtype="float32", check=CHECKS)
    case = "b1h2s100t70d64:mask=causal_tl"  # the smoke case with a causal mask and S != T
    bad = [r for r in res.results if r["verdict"] not in OK]
    assert [(r["check"], r["problem"]) for r in bad] == [("refusal", case)], [(r["check"], r["problem"]) for r in bad]
    assert "No available kernel" in bad[0]["reason"]
    same_case = [r for r in res.results if r["problem"] == case and r["check"] != "refusal"]
    assert same_case and all(r["verdict"] == "unsupported" and "refus" in r["reason"] for r in same_case)


def test_declared_causal_cross_refusal_passes():
    res = attest.gate(refuses_causal_cross, recipe="f32", dtype="float32", check=CHECKS, causal_cross=False)
    assert res.passed, res.summary
    case = [r for r in res.results if r["problem"] == "b1h2s100t70d64:mask=causal_tl"]
    assert case and all(r["verdict"] in OK for r in case)
    assert "causal_cross" in res.markdown


def flushes_subnormals(q, k, v, *, causal, scale):
    out = sdpa(q, k, v, causal=causal, scale=scale)
    return torch.where(out.abs() < 2.0 ** -126, torch.zeros_like(out), out)


def test_ftz_undeclared_fails_declared_is_reported():
    res = attest.gate(flushes_subnormals, recipe="f32", dtype="float32", check="subnormal")
    assert rows(res, "failed", "subnormal") and all("flushed" in r["reason"] for r in rows(res, "failed"))
    res = attest.gate(flushes_subnormals, recipe="f32", dtype="float32", check="subnormal", ftz=True)
    passed = rows(res, "passed", "subnormal")
    assert res.passed and passed and all("ftz declared" in r["reason"] for r in passed), res.summary
    assert "ftz" in res.markdown


def sdpa_bshd(q, k, v, *, causal, scale):
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    return t(sdpa(t(q), t(k), t(v), causal=causal, scale=scale))


def ignores_v_strides(q, k, v, *, causal, scale):
    # Reads V as a dense [B, T, H, Dv] buffer whatever its strides: right for a contiguous V,
    # wrong for a transposed view or a KV-cache slice.
    dense = torch.empty(v.shape).stride()
    v = torch.as_strided(v, v.shape, dense, v.storage_offset())
    return sdpa_bshd(q, k, v, causal=causal, scale=scale)


def test_layout_check_drives_v_through_its_own_layout():
    res = attest.gate(sdpa_bshd, recipe="f32", dtype="float32", layout="bshd", check="layout")
    assert res.passed, res.summary
    res = attest.gate(ignores_v_strides, recipe="f32", dtype="float32", layout="bshd", check="layout,accuracy")
    # The default call is right where V is dense (cases without a layout= of their own).
    assert all(r["verdict"] in OK for r in rows(res, check="accuracy") if "layout=" not in r["problem"])
    failed = rows(res, "failed", "layout")
    assert failed and all(r["reason"].startswith("v:") or " v:" in r["reason"] for r in failed), \
        [r["reason"] for r in failed]


def aborts_on_unaligned_rows(q, k, v, *, causal, scale):
    # A kernel that loads 16-byte vectors: an unaligned row is an illegal access (here an abort).
    for x in (q, k, v):
        if any(s % 4 for s in x.stride()[:-1]) or x.storage_offset() % 4:
            os.abort()
    return sdpa(q, k, v, causal=causal, scale=scale)


def test_min_alignment_declaration_keeps_rows_aligned():
    res = attest.gate(aborts_on_unaligned_rows, recipe="f32", dtype="float32", check=CHECKS, min_alignment=16)
    assert res.passed, [(r["check"], r["problem"], r["reason"]) for r in res.failures]
    strided = [r for r in res.results if "pad=5" in r["problem"] and r["check"] != "refusal"]
    assert strided and all(r["verdict"] == "unsupported" and "row_align" in r["reason"] for r in strided), \
        [(r["check"], r["verdict"], r["reason"]) for r in strided]
    res = attest.gate(aborts_on_unaligned_rows, recipe="f32", dtype="float32", check=CHECKS)
    assert rows(res, "fault") and all(r["verdict"] in OK + ("fault",) for r in res.results)


def leaks_nan_through_masked_keys(q, k, v, *, causal, scale):
    # Planted (and what some real kernels do): masked keys still multiply V, so 0 * NaN leaks.
    out = sdpa(q, k, v, causal=causal, scale=scale)
    if causal and torch.isnan(v).any():
        out = out + 0.0 * v.sum(dim=-2, keepdim=True).sum(dim=-1, keepdim=True)
    return out


def test_accepted_defect_is_reported_not_passed():
    res = attest.gate(leaks_nan_through_masked_keys, recipe="f32", dtype="float32", check="nonfinite")
    leaks = rows(res, "failed", "nonfinite")
    assert leaks and not res.passed
    why = "NaN in V leaks through masked keys (findings.md)"
    res = attest.gate(leaks_nan_through_masked_keys, recipe="f32", dtype="float32", check="nonfinite",
                      accept={"nonfinite": why})
    accepted = rows(res, "accepted", "nonfinite")
    assert res.passed and len(accepted) == len(leaks) and not rows(res, "failed")
    assert all(r["reason"].startswith(f"accepted (declared: {why}): ") for r in accepted)
    assert f"accepts nonfinite ({why})" in res.markdown and "accepted" in res.summary


def phantom_tail_keys(q, k, v, *, causal, scale):
    # Planted (SageAttention 1.0.6 does this, findings.md): the last partial 64-key tile is padded
    # with zero keys and values that still join the softmax (score 0, weight exp(0 - max)).
    pad = -k.shape[2] % 64
    if causal or pad == 0:
        return sdpa(q, k, v, causal=causal, scale=scale)
    z = k.new_zeros(k.shape[0], k.shape[1], pad, k.shape[3]), v.new_zeros(v.shape[0], v.shape[1], pad, v.shape[3])
    return sdpa(q, torch.cat([k, z[0]], 2), torch.cat([v, z[1]], 2), causal=False, scale=scale)


def wrong_scale(q, k, v, *, causal, scale):
    return sdpa(q, k, v, causal=causal, scale=scale * 1.5)


def test_scoped_accept_covers_only_the_shapes_it_names():
    res = attest.gate(phantom_tail_keys, recipe="f32", dtype="float32", check="accuracy")
    failed = rows(res, "failed")
    # attest's conclusion matches where the planted bug acts: non-causal cases with T % 64 != 0.
    assert failed and all("mask=" not in r["problem"] for r in failed), [r["problem"] for r in failed]
    assert all(r["verdict"] in OK for r in rows(res) if r["problem"].startswith("b1h2s64d64"))
    why = "tail keys of the last tile join the softmax (findings.md)"
    scoped = {"accuracy@seqlen_kv%64": why}
    res = attest.gate(phantom_tail_keys, recipe="f32", dtype="float32", check="accuracy", accept=scoped)
    assert res.passed and len(rows(res, "accepted")) == len(failed) and not rows(res, "failed")
    assert f"accepts accuracy@seqlen_kv%64 ({why})" in res.markdown
    # A bug on every shape: the scope accepts it where T % 64 != 0 and fails it where T = 64.
    res = attest.gate(wrong_scale, recipe="f32", dtype="float32", check="accuracy", accept=scoped)
    still = rows(res, "failed")
    assert not res.passed and still and all(r["problem"].startswith("b1h2s64d64") for r in still), \
        [r["problem"] for r in still]
    assert rows(res, "accepted")
    for bad in ("accuracy@seqlen%64", "accuracy@seqlen_kv%1", "accuracy@seqlen_kv%x"):
        try:
            attest.gate(sdpa, recipe="f32", dtype="float32", check="accuracy", accept={bad: why})
        except attest.AttestError as e:
            assert bad in str(e)
        else:
            raise AssertionError(f"accept key {bad} was taken")


def test_supports_is_a_declaration_and_a_call_time_refusal_is_not():
    def limits(p):
        return "declared: no T = 136" if p["seqlen_kv"] == 136 else None

    res = attest.gate(sdpa, recipe="f32", dtype="float32", check=CHECKS, supports=limits)
    assert res.passed, [(r["check"], r["problem"], r["reason"]) for r in res.failures]
    t136 = [r for r in res.results if r["problem"].startswith("b1h2s72t136d128")]
    assert t136 and all(r["verdict"] in OK for r in t136)
    assert all("declared: no T = 136" in r["reason"] for r in t136 if r["check"] != "refusal")
    assert "supports() declares limits" in res.markdown

    def refuses_at_call_time(q, k, v, *, causal, scale):
        if is_target(q, k):
            raise attest.Unsupported("no plan for T = 136")
        return sdpa(q, k, v, causal=causal, scale=scale)

    res = attest.gate(refuses_at_call_time, recipe="f32", dtype="float32", check=CHECKS)
    failed = rows(res, "failed")
    assert len(failed) == 1 and failed[0]["check"] == "refusal" and "no plan for T = 136" in failed[0]["reason"]


def test_a_raising_supports_is_an_error_not_a_declared_limit():
    def broken(p):
        if p["seqlen_kv"] == 136:
            raise KeyError("seq_len")
        return None

    try:
        attest.gate(sdpa, recipe="f32", dtype="float32", check="accuracy", supports=broken)
    except attest.AttestError as e:
        assert "supports() raised KeyError" in str(e)
    else:
        raise AssertionError("a raising supports= was taken as a declaration")
