#!/usr/bin/env bash
R=$OUT/r3; mkdir -p $R
timeout 100 python3 docs/results/python-path/repro_sdpa_unaligned.py $R/repro.json > $R/repro.log 2>&1; echo "repro rc=$?"
export PYTHONPATH=build/py-cuda-bundle LD_LIBRARY_PATH=build/py-cuda-bundle/attest
timeout 60 python3 -c "
import attest, json, sys
sys.path.insert(0, 'scripts/device'); import python_path as pp
p = attest.probe(pp.sdpa, device='cuda'); print(json.dumps(p.evidence, indent=1))
" > $R/probe_evidence.json 2> $R/probe.err; echo "probe rc=$?"
cat $R/probe_evidence.json
