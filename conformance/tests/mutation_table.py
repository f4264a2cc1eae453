#!/usr/bin/env python3
"""The "Mutants" table of docs/gate.md from conformance_mutation's output.

    build/default/conformance/conformance_mutation > mutation.txt
    conformance/tests/mutation_table.py mutation.txt [kernels/cpu/mutants/attn_fwd_mutants.cpp]

The bug column is each catalogue entry's comment in attn_fwd_mutants.cpp (the lines above its
`{make<Bug::...>, "name", ...}` line); the two check columns are the test's two Markdown tables
(bitwise registrations mutant.<name>, non-bitwise registrations mutant.nb.<name>)."""
import re
import sys

out = open(sys.argv[1]).read().splitlines()
src = open(sys.argv[2] if len(sys.argv) > 2 else "kernels/cpu/mutants/attn_fwd_mutants.cpp").read().splitlines()

bug, comment = {}, []
for line in src:
    s = line.strip()
    m = re.match(r'\{make<Bug::\w+>, "(\w+)", ([^}]+)\},', s)
    if s.startswith("//"):
        comment.append(s[2:].strip())
    elif m:
        recipe = m.group(2).strip('"')
        bug[m.group(1)] = " ".join(comment) + f" (recipe {recipe if recipe != 'kSageVDirect' else 'Sage, V cast directly'})"
        comment = []
    else:
        comment = []

tables, cur = [], None
for line in out:
    if line.startswith("| mutant | caught by |"):
        cur = {}
        tables.append(cur)
    elif cur is not None and line.startswith("| ") and not line.startswith("|---"):
        name, checks = [c.strip() for c in line.strip("|").split("|", 1)]
        cur[name] = checks
    elif not line.startswith("|"):
        cur = None
if len(tables) != 2:
    sys.exit(f"mutation_table: expected 2 tables in {sys.argv[1]}, found {len(tables)}")
print("| mutant | bug | caught by (mutant.<name>, claims bitwise) | caught by (mutant.nb.<name>, no bitwise claim) |")
print("|---|---|---|---|")
for name in sorted(set(tables[0]) | set(tables[1])):
    print(f"| {name} | {bug.get(name, '?').replace('|', '/')} | {tables[0].get(name, '-')} | {tables[1].get(name, '-')} |")
