#!/usr/bin/env bash
set -u
R=$OUT/r2; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/r2.tgz -C $OUT r2 2>/dev/null; }
el repro; timeout 60 python3 docs/results/python-path/repro_sdpa_unaligned.py $R/repro.json > $R/repro.log 2>&1; echo "repro rc=$?"; tail -3 $R/repro.log; pk
el quant_old; timeout 40 build/py-cuda-bundle/bin/bench_gpu_quantize b1h32s65536d128 --iters 10 --json $R/quant_old.json > $R/quant_old.log 2>&1; pk
el python-path; OUT=$R PARTS=cuda_build_gate_device,spawned_closure_gate,pair_flash_cudnn,casefile BUDGET=${PP_BUDGET:-200} timeout 215 scripts/device/run python-path > $R/python_path.log 2>&1; echo "python-path rc=$?"; pk
el done
