"""batch2 judges every sample of the batch (issue 33). The config calls fn on a batch of the case's
sample and a second, different one (as in CFG); the first half goes back to the call_path check,
the second must equal fn's own call on that sample alone. A kernel that copies sample 0's output
into sample 1 when the batch is > 1 passed every smoke check before (only the first half was
looked at, and smoke's one batch >= 2 case is bottom-right causal); now it fails smoke."""
import re

import attest
from conftest import sdpa as torch_sdpa
from test_isolation import sdpa as control  # float64 attention: bits independent of batch and strides

# Every check but the NaN and subnormal policies, which this control and torch's CPU kernel break
# on some CPUs for reasons of their own (test_torch_cpu.py, test_isolation.py judge those).
CHECKS = "bitwise,accuracy,determinism,call_path,layout,poison,canary,churn,split_kv,masked_rows,refusal"
SECOND = "batch2: the batch's second sample (another sample, as in CFG) is not fn's own call on it alone"


def copies_sample_0_into_sample_1(base):
    def plant(q, k, v, *, causal, scale):
        out = base(q, k, v, causal=causal, scale=scale).clone()
        if out.shape[0] > 1:
            out[1] = out[0]  # the CFG batch bug: the conditional sample's output in the unconditional's place
        return out
    return plant


def elements(problem: str) -> int:
    """B * S * H * Dv of a problem string (bshd output elements), read from the string itself."""
    b, h, s, t, d, v = re.match(r"b(\d+)h(\d+)(?:k\d+)?s(\d+)(?:t(\d+))?d(\d+)(?:v(\d+))?", problem).groups()
    return int(b) * int(s) * int(h) * int(v or d)


def test_batch_contamination_fails_on_smoke_and_the_control_passes():
    honest = attest.gate(control, recipe="f32", dtype="float32", cases="smoke", check=CHECKS)
    assert honest.passed, [(r["check"], r["problem"], r["reason"]) for r in honest.failures]
    judged = {r["problem"] for r in honest.results if r["check"] == "call_path" and r["verdict"] == "passed"}
    assert len(judged) >= 4, judged  # the smoke cases this kernel supports, batch2 among their configs

    plant = attest.gate(copies_sample_0_into_sample_1(control), name="plant", recipe="f32", dtype="float32",
                        cases="smoke", check=CHECKS)
    assert not plant.passed
    # Exactly the call_path rows fail, on every case it judges, each naming the second sample.
    assert {(r["check"], r["problem"]) for r in plant.failures} == {("call_path", p) for p in judged}
    for r in plant.failures:
        assert SECOND in r["reason"], r["reason"]
        n, m = map(int, re.search(r"(\d+) of (\d+) out elements differ bitwise", r["reason"]).groups())
        # The second sample is another sample (reversed sequence, negated q): its output differs from
        # the first's almost everywhere, and the count is over the whole [B,S,H,Dv] output.
        assert m == elements(r["problem"]) and n >= 0.9 * m, (r["problem"], n, m)
    # Every other check still passes: the first half of each batch is right.
    assert all(r["verdict"] in ("passed", "unsupported") for r in plant.results if r["check"] != "call_path")


def test_batch_contamination_fails_on_smoke_with_torch_sdpa():
    honest = attest.gate(torch_sdpa, cases="smoke", check="call_path")
    plant = attest.gate(copies_sample_0_into_sample_1(torch_sdpa), name="plant_torch", cases="smoke",
                        check="call_path")
    # Whether torch's CPU kernel keeps its bits in a batch of 2 is its choice on this CPU
    # (test_torch_cpu.py); where it does (the call_path row passed), the plant fails there by its
    # second sample.
    passed = {r["problem"] for r in honest.results if r["check"] == "call_path" and r["verdict"] == "passed"}
    assert all(r["verdict"] in ("passed", "unsupported") or " elements differ" in r["reason"] for r in honest.results)
    assert not plant.passed
    for r in plant.results:
        if r["check"] == "call_path" and r["problem"] in passed:
            assert r["verdict"] == "failed" and SECOND in r["reason"], (r["problem"], r["reason"])
