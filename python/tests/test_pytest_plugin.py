"""The pytest plugin: the one test file a kernel repository adds (docs/python.md)."""

TEST_FILE = '''
import torch.nn.functional as F

def good(q, k, v, *, causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)

def bad(q, k, v, *, causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=False, scale=scale, enable_gqa=True)

def test_good(attest_gate):
    attest_gate(good, recipe="f32", dtype="float32", check="accuracy,determinism,layout")

def test_bad(attest_gate):
    attest_gate(bad, recipe="f32", dtype="float32", check="accuracy")

def test_unrelated():
    pass
'''


def test_plugin_fixture_and_options(pytester):
    pytester.makepyfile(test_kernel=TEST_FILE)
    out = pytester.path / "reports"
    # The installed package's pytest11 entry point loads the plugin (no -p needed).
    r = pytester.runpytest("--attest", f"--attest-out={out}")
    r.assert_outcomes(passed=1, failed=1, deselected=1)
    r.stdout.fnmatch_lines(["*attest gate failed for py.bad*", "*attest.run_case(bad, 'kernel=py.bad*"])
    assert (out / "py.good" / "gate.md").is_file() and (out / "py.bad" / "junit.xml").is_file()
