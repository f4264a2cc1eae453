"""pytest plugin (entry point pytest11 `attest`): one fixture and a few options, so a kernel
repository adds attest to its CI with one test file (docs/python.md):

    def test_my_kernel(attest_gate):
        attest_gate(my_attention, recipe="bf16", device="cuda")

`attest_gate(fn, **gate_kwargs)` runs attest.gate with the session's options, writes the reports
under --attest-out/<kernel>/ when given, and fails the test with the summary, every failing
case's reason and its Python repro line. Options:

  --attest             run only the tests that use attest fixtures (deselect the rest)
  --attest-cases SET   case set or file (default: the gate's default, smoke)
  --attest-profile P   profile (default cpu)
  --attest-check GLOBS only these checks
  --attest-reruns N    determinism reruns (default 5)
  --attest-out DIR     write gate.md, gate.json, junit.xml, summary.txt per kernel
"""
from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = ("attest_gate",)


def pytest_addoption(parser):
    g = parser.getgroup("attest", "attest conformance gate")
    g.addoption("--attest", action="store_true", default=False, help="run only tests that use attest fixtures")
    g.addoption("--attest-cases", default=None, help="case set (smoke, ci, nightly, qualify, seeds) or case file")
    g.addoption("--attest-profile", default=None, help="gate profile (cpu, sm90, ...)")
    g.addoption("--attest-check", default=None, help="comma-separated check globs")
    g.addoption("--attest-reruns", type=int, default=None, help="determinism reruns")
    g.addoption("--attest-out", default=None, help="folder for per-kernel reports")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--attest"):
        return
    keep, drop = [], []
    for item in items:
        (keep if any(f in getattr(item, "fixturenames", ()) for f in FIXTURES) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _failure_text(res, fn_name: str) -> str:
    lines = [f"attest gate failed for {res.kernel}: {res.counts()}", res.summary.rstrip()]
    for r in res.failures[:20]:
        lines.append(f"- {r.get('check')}: {r.get('verdict')}: {r.get('reason', '')}")
        lines.append(f"  attest.run_case({fn_name}, '{r['case']}')")
    if len(res.failures) > 20:
        lines.append(f"... and {len(res.failures) - 20} more")
    return "\n".join(lines)


@pytest.fixture
def attest_gate(request):
    import attest  # noqa: PLC0415

    opt = request.config.getoption

    def run(fn, **kwargs):
        for key, name in (("cases", "--attest-cases"), ("profile", "--attest-profile"), ("check", "--attest-check"),
                          ("reruns", "--attest-reruns")):
            if opt(name) is not None and key not in kwargs:
                kwargs[key] = opt(name)
        res = attest.gate(fn, **kwargs)
        if opt("--attest-out"):
            res.write(Path(opt("--attest-out")) / res.kernel)
        if not res.passed:
            pytest.fail(_failure_text(res, getattr(fn, "__name__", "fn")), pytrace=False)
        return res

    return run
