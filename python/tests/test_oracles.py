"""Where the callback gate judges (issue 33): oracles="device" with device="cuda" takes the
device engine's oracles (FP64 reference on the GPU, emulator on planned blocks, device
comparisons), the default for a CUDA callable when the library has the CUDA engine (the host's
otherwise; docs/results/python-path/findings.md says why it was opt-in for a while). What a CPU
build can test: the route chosen, the refusal without the CUDA
library (one AttestError before any call, never rows blamed on the kernel), spawned workers
under device oracles, the host route unchanged, and the long case file parsing."""
from pathlib import Path

import pytest

import attest
from attest import _native as N
from attest import _worker as W
from conftest import sdpa

CASES = Path(__file__).resolve().parents[2] / "docs" / "results" / "python-path" / "cases.txt"


def counting():
    calls = []

    def fn(q, k, v, *, causal, scale):
        calls.append(1)
        return sdpa(q, k, v, causal=causal, scale=scale)
    return fn, calls


def test_device_route_is_the_default_for_cuda_callables_with_the_cuda_library(monkeypatch):
    fn, _ = counting()
    monkeypatch.setattr(N, "gpu_backend", lambda: False)
    assert attest._oracles(None, "cuda", fn) == "host"  # a CPU build judges a CUDA callable on the host
    monkeypatch.setattr(N, "gpu_backend", lambda: True)
    assert attest._oracles(None, "cuda", fn) == "device"
    assert attest._oracles("device", "cuda", fn) == "device"
    assert attest._oracles("device", "cuda:0", fn) == "device"
    assert attest._oracles(None, "cpu", fn) == "host"
    assert attest._oracles(None, None, fn) == "host"
    assert attest._oracles("host", "cuda", fn) == "host"  # explicit host oracles for a CUDA callable
    fn.attest_declares = {"device": "cuda"}
    assert attest._oracles(None, None, fn) == "device"
    assert attest._oracles("device", None, fn) == "device"
    with pytest.raises(attest.AttestError, match="needs device='cuda'"):
        attest._oracles("device", "cpu", fn)
    with pytest.raises(attest.AttestError, match="'nowhere' is not 'host' or 'device'"):
        attest._oracles("nowhere", "cuda", fn)


@pytest.mark.skipif(N.gpu_backend(), reason="this libattest_py has the CUDA engine")
def test_cuda_without_the_cuda_build_is_one_error_before_any_call():
    fn, calls = counting()
    for run in (lambda: attest.gate(fn, device="cuda", cases="smoke", isolate=False, oracles="device"),
                lambda: attest.run_case(fn, "kernel=py.fn recipe=bf16 problem=b1h2s64d64 dist=normal seed=1",
                                        device="cuda", isolate=False, oracles="device")):
        with pytest.raises(attest.AttestError) as e:
            run()
        text = str(e.value)
        assert "\n" not in text
        assert "built without CUDA" in text and "ATTEST_GPU=cuda pip install ./python" in text
        assert "oracles='host'" in text
    assert calls == []


@pytest.mark.skipif(N.gpu_backend(), reason="this libattest_py has the CUDA engine")
def test_library_refuses_device_oracles_without_a_gpu_backend():
    assert N.call("build")[1] == {"gpu_backend": False}
    kernel = attest.list_items("kernels")[0]
    with pytest.raises(attest.AttestError, match="built without CUDA"):
        N.call("gate", kernel=kernel, cases="smoke", oracles="device")
    with pytest.raises(attest.AttestError, match="oracles 'gpu' is not host or device"):
        N.call("gate", kernel=kernel, cases="smoke", oracles="gpu")


def test_device_oracles_spawn_workers_from_then_on(monkeypatch):
    monkeypatch.delenv(W.START_ENV, raising=False)
    monkeypatch.setattr(W, "_PARENT_RUNS_CUDA", False)
    assert W.start_method() in ("fork", "spawn")
    assert W.start_method(device_oracles=True) == "spawn"
    # The parent may now hold libattest_py's CUDA context: later workers and probes spawn too.
    assert W.start_method() == "spawn"
    monkeypatch.setenv(W.START_ENV, "fork")
    assert W.start_method(device_oracles=True) == "fork"  # an explicit override still wins


def test_host_route_unchanged_on_the_cpu():
    res = attest.gate(sdpa, cases="smoke", check="accuracy", isolate=False)
    assert res.passed, res.markdown
    assert "oracles" not in res.report["meta"]
    assert not any(line.startswith("oracles:") for line in res.summary.splitlines())
    assert "device engine" not in res.markdown
    judged = [r for r in res.results if r["verdict"] == "passed"]
    assert judged and all("oracles" not in r.get("figures", {}) for r in judged)
    assert all("blocks" in r["figures"] for r in judged)  # the host path's per-block figures


def test_the_long_case_file_parses():
    # bitwise is not declared by an accuracy-contract callable: every case is UNSUPPORTED before
    # any input is generated or call made, so this only expands the file.
    fn, calls = counting()
    res = attest.gate(fn, cases=str(CASES), check="bitwise", isolate=False)
    assert res.passed and calls == []
    problems = sorted({(r["problem"], r["dist"]) for r in res.results})
    assert problems == sorted([("b1h16k4s2048d128", "normal"), ("b1h8s1536t4096d64", "diffusion"),
                               ("b1h8k2s4096d128:mask=causal_tl", "normal"), ("b1h8s3072d128", "outlier"),
                               ("b1h8s3072d128", "sink")])
