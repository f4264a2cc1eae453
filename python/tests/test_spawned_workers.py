"""Isolated workers run any callable, whichever start method (issue 33). A parent that has
initialised CUDA must spawn its workers, so the callable travels by cloudpickle; these tests force
spawn (ATTEST_WORKER_START) on the CPU. When attest itself cannot start a worker, the gate raises
one AttestError naming the cause and the remedy instead of rows blamed on the kernel."""
import functools
import sys
import threading
import types

import pytest

import attest
from test_isolation import sdpa  # float64 attention: bits independent of strides and batch

ONE_CASE = "kernel=* recipe=* problem=b1h2s72t136d128 dist=diffusion seed=8\n"  # a smoke case


@pytest.fixture
def spawn(monkeypatch):
    monkeypatch.setenv("ATTEST_WORKER_START", "spawn")


def workers_started(res):
    return [w["method"] for w in res.report["workers"]]


@pytest.mark.parametrize("factor,passes", [(1.0, True), (1.5, False)])
def test_spawned_closure_with_a_lambda_supports(spawn, factor, passes):
    # The closure's captured factor reaches the worker: 1.0 is attention, 1.5 a wrong softmax scale
    # that accuracy must fail. The lambda supports= declares T = 136 out (asked in this process).
    def closure(q, k, v, *, causal, scale):
        return sdpa(q, k, v, causal=causal, scale=scale * factor)

    res = attest.gate(closure, recipe="f32", dtype="float32", check="accuracy,refusal",
                      supports=lambda p: "declared: no T = 136" if p["seqlen_kv"] == 136 else None)
    assert workers_started(res) == ["spawn"], res.report["workers"]
    t136 = [r for r in res.results if r["problem"].startswith("b1h2s72t136d128")]
    assert t136 and all(r["verdict"] in ("passed", "unsupported") for r in t136)
    assert all("declared: no T = 136" in r["reason"] for r in t136 if r["check"] == "accuracy")
    if passes:
        assert res.passed, [(r["check"], r["problem"], r["reason"]) for r in res.failures]
        assert sum(r["verdict"] == "passed" for r in res.results if r["check"] == "accuracy") >= 5
    else:
        failed = [r for r in res.results if r["verdict"] == "failed"]
        assert failed and all(r["check"] == "accuracy" for r in failed), res.summary


class Scaled:
    def __init__(self, factor):
        self.factor = factor

    def attend(self, q, k, v, *, causal, scale):
        return sdpa(q, k, v, causal=causal, scale=scale * self.factor)


def scaled(q, k, v, *, causal, scale, factor):
    return sdpa(q, k, v, causal=causal, scale=scale * factor)


@pytest.mark.parametrize("make", [lambda f: Scaled(f).attend, lambda f: functools.partial(scaled, factor=f),
                                  lambda f: (lambda q, k, v, *, causal, scale: sdpa(q, k, v, causal=causal,
                                                                                    scale=scale * f))],
                         ids=["bound_method", "partial", "lambda"])
def test_spawned_bound_method_partial_and_lambda(spawn, make):
    for factor, passes in ((1.0, True), (1.5, False)):
        res = attest.gate(make(factor), name="any_callable", recipe="f32", dtype="float32", check="accuracy",
                          cases_text=ONE_CASE)
        assert workers_started(res) == ["spawn"] and res.passed == passes, (factor, res.summary)
        assert [r["verdict"] for r in res.results if r["check"] == "accuracy"] == ["passed" if passes else "failed"]


def test_a_callable_that_does_not_pickle_is_one_attest_error(spawn):
    lock = threading.Lock()  # closed over: no pickler can carry it to another process

    def holds_a_lock(q, k, v, *, causal, scale):
        with lock:
            return sdpa(q, k, v, causal=causal, scale=scale)

    with pytest.raises(attest.AttestError) as e:
        attest.gate(holds_a_lock, recipe="f32", dtype="float32", check="accuracy", cases_text=ONE_CASE)
    text = str(e.value)
    assert "cannot start a worker process (spawn)" in text and "holds_a_lock" in text
    assert "lock" in text and "isolate=False" in text, text
    # The remedy works: in-process, the same callable passes.
    assert attest.gate(holds_a_lock, recipe="f32", dtype="float32", check="accuracy", cases_text=ONE_CASE,
                       isolate=False).passed


def test_a_worker_that_cannot_rebuild_the_callable_is_one_attest_error(spawn):
    # A module that exists in this process only: pickled by reference here, not importable in a
    # fresh interpreter. The spawned worker says so before any call.
    ghost = types.ModuleType("attest_ghost_module")
    exec("def fn(q, k, v, *, causal, scale):\n    raise AssertionError('never called')\n", ghost.__dict__)
    ghost.fn.__module__ = "attest_ghost_module"
    sys.modules["attest_ghost_module"] = ghost
    try:
        with pytest.raises(attest.AttestError) as e:
            attest.gate(ghost.fn, recipe="f32", dtype="float32", check="accuracy", cases_text=ONE_CASE)
    finally:
        del sys.modules["attest_ghost_module"]
    text = str(e.value)
    assert "cannot start a worker process (spawn)" in text and "No module named 'attest_ghost_module'" in text, text
    assert "isolate=False" in text


def test_start_method_setting_is_checked(monkeypatch):
    monkeypatch.setenv("ATTEST_WORKER_START", "threads")
    with pytest.raises(attest.AttestError, match="ATTEST_WORKER_START='threads' is not auto, fork or spawn"):
        attest.gate(sdpa, recipe="f32", dtype="float32", check="accuracy", cases_text=ONE_CASE)
    monkeypatch.setenv("ATTEST_WORKER_START", "fork")
    res = attest.gate(sdpa, recipe="f32", dtype="float32", check="accuracy", cases_text=ONE_CASE)
    assert res.passed and workers_started(res) == ["fork"]
