"""Inputs errors, reports, repro from Python, parity."""
import json
import re

import pytest
import torch

import attest
from conftest import sdpa


def test_input_errors_are_one_line():
    with pytest.raises(attest.AttestError, match="contract 'exact'"):
        attest.gate(sdpa, contract="exact")
    with pytest.raises(attest.AttestError, match="nosuchset"):
        attest.gate(sdpa, cases="nosuchset")
    with pytest.raises(attest.AttestError, match="graph"):
        attest.gate(sdpa, configs=["graph"])  # a CUDA config on a CPU callable
    with pytest.raises(attest.AttestError, match="recipe"):
        attest.gate(sdpa, recipe="no_such_recipe")


def scaled(q, k, v, *, causal, scale):
    return sdpa(q, k, v, causal=causal, scale=scale * 1.01)


def test_report_files_and_python_repro(tmp_path):
    res = attest.gate(scaled, recipe="f32", dtype="float32", out=tmp_path / "gate")
    assert not res.passed
    for f in ("gate.md", "gate.json", "junit.xml", "summary.txt"):
        assert (tmp_path / "gate" / f).stat().st_size > 0
    data = json.loads((tmp_path / "gate" / "gate.json").read_text())
    assert len(data["results"]) == len(res.results)
    assert "attest.run_case(scaled, 'kernel=py.scaled" in (tmp_path / "gate" / "gate.md").read_text()
    first = next(r for r in res.failures if r["check"] == "accuracy")
    rc, results, dump = attest.run_case(scaled, first["case"], dtype="float32")
    assert rc == 1 and results[0]["verdict"] == "failed" and results[0]["reason"] == first["reason"]
    assert "rel_l2" in dump


def sdpa_math(q, k, v, *, causal, scale):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        return sdpa(q, k, v, causal=causal, scale=scale)


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


def test_pair_bitwise_and_accuracy():
    # Whether torch's kernel gives the same bits on contiguous copies of strided inputs depends on
    # its build (the BLAS / microkernel it picks for each stride): the wrapper observes it on every
    # call, and attest's bitwise verdict must say the same.
    seen = []

    def wrapped(q, k, v, *, causal, scale):
        out = sdpa(q.contiguous(), k.contiguous(), v.contiguous(), causal=causal, scale=scale).clone()
        seen.append(same_bits(out, sdpa(q, k, v, causal=causal, scale=scale)))
        return out

    # isolate=False: `seen` is filled in this process (a worker's appends would be lost).
    rc, results = attest.pair(sdpa, wrapped, contract="bitwise", recipe="f32", dtype="float32", isolate=False)
    assert seen
    if all(seen):
        assert rc == 0 and sum(r["verdict"] == "passed" for r in results) >= 11
    else:
        assert rc == 1 and any(r["verdict"] == "failed" for r in results)
    rc, results = attest.pair(sdpa, nudged, contract="bitwise", recipe="f32", dtype="float32")
    assert rc == 1  # the failing branch, on every machine
    rc, results = attest.pair(sdpa, sdpa_math, contract="accuracy", recipe="f32", dtype="float32")
    assert rc == 0, [r["reason"] for r in results if r["verdict"] != "passed"]
    rc, results = attest.pair(sdpa, scaled, contract="accuracy", recipe="f32", dtype="float32")
    assert rc == 1


def nudged(q, k, v, *, causal, scale):
    # One ulp off in the first output element: bits differ, values within any accuracy bound.
    out = sdpa(q, k, v, causal=causal, scale=scale).contiguous().clone()
    out.view(torch.int32).view(-1)[0] ^= 1
    return out


def refuses_cross(q, k, v, *, causal, scale):
    if q.shape[2] != k.shape[2]:  # bhsd: S != T
        raise NotImplementedError("no cross attention (S != T)")
    return sdpa(q, k, v, causal=causal, scale=scale)


def is_cross(problem):
    """S != T, read from the problem string (t<T> is printed only when T != S)."""
    s, t = re.match(r"b\d+h\d+(?:k\d+)?s(\d+)(?:t(\d+))?", problem).groups()
    return t is not None and t != s


def test_pair_a_refused_case_is_unsupported_with_the_reason():
    rc, results = attest.pair(sdpa, sdpa, contract="bitwise", recipe="bf16")
    compared = {r["problem"] for r in results if r["verdict"] == "passed"}
    assert rc == 0 and any(map(is_cross, compared)) and not all(map(is_cross, compared)), compared
    for a, b, side in ((sdpa, refuses_cross, "py.refuses_cross_b"), (refuses_cross, sdpa, "py.refuses_cross_a")):
        rc, results = attest.pair(a, b, contract="bitwise", recipe="bf16")
        assert rc == 0 and not [r for r in results if r["verdict"] == "failed"], \
            [(r["problem"], r["verdict"], r["reason"]) for r in results if r["verdict"] != "passed"]
        for r in results:
            if r["problem"] in compared and is_cross(r["problem"]):
                assert r["verdict"] == "unsupported" and r["reason"] == \
                    f"{side}: refused at call time: NotImplementedError: no cross attention (S != T)", r
            elif r["problem"] in compared:  # neither side refuses: the pair still compares
                assert r["verdict"] == "passed", r


def raises_on_cross(q, k, v, *, causal, scale):
    if q.shape[2] != k.shape[2]:
        raise RuntimeError("index out of range")  # a crash, not a refusal
    return sdpa(q, k, v, causal=causal, scale=scale)


def test_pair_an_error_is_not_a_refusal():
    rc, results = attest.pair(sdpa, raises_on_cross, contract="bitwise", recipe="bf16")
    assert rc == 1 and any(r["verdict"] == "error" and "index out of range" in r["reason"] for r in results)
