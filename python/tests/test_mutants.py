"""attest's own mutants (one planted bug each, kernels/cpu/mutants) through the Python path:
attest.cpp_kernel wraps the C++ kernel as a torch callable, attest.gate registers that callable
as py.*, and every tensor travels C++ -> numpy -> torch -> C++ -> torch -> C++."""
import pytest

import attest

MUTANTS = [k for k in attest.list_items("kernels") if k.startswith("mutant.")]
# oob_write writes one element past the output, into the buffer's guard zone. Through the Python
# path the output is a fresh tensor whose logical elements are copied into attest's buffer, so
# the stray write lands in a scratch buffer and cannot be seen (the C++ gate catches it directly).
# cu_kv_from_q only misbehaves on ragged (varlen) problems, which the Python bridge refuses
# (dense tensors only), so no case routed through Python can show it; the C++ gate catches it.
NOT_ROUTABLE = {f"mutant.{p}{n}" for p in ("", "nb.") for n in ("oob_write", "cu_kv_from_q")}
# Every CPU mutant is registered twice: mutant.<n> (claims bitwise) and mutant.nb.<n> (does not).
CPU_MUTANTS = [m for m in MUTANTS if not m.startswith("mutant.gpu.")]


def gate_cpp(name):
    fn = attest.cpp_kernel(name)
    return attest.gate(fn, recipe=fn.attest_recipe, contract="bitwise", layout="bshd", causal="both", dtype="float32")


def test_every_mutant_is_listed():
    # 32 planted CPU bugs (kernels/cpu/mutants/attn_fwd_mutants.cpp), two registrations each.
    assert len(CPU_MUTANTS) == 64
    assert sum(m.startswith("mutant.nb.") for m in CPU_MUTANTS) == 32


@pytest.mark.parametrize("name", [m for m in CPU_MUTANTS if m not in NOT_ROUTABLE])
def test_mutant_caught(name):
    res = gate_cpp(name)
    assert res.exit_code == 1
    assert any(r["verdict"] == "failed" for r in res.results), res.summary


def test_control_kernel_passes_through_the_same_path():
    res = gate_cpp("cpu.tiled.bf16")
    assert res.exit_code == 0, res.summary
    assert res.counts().get("passed", 0) >= 80
