#!/usr/bin/env bash
# Device call 7 of 2026-12-07 (session 3): gpu_emu_tests with SayWhy's expectation fixed; false-
# alarm seeds of Sage 1.0.6 and cuDNN FP8 under their recipes at Wan 480p (seeds 2-4).
set -u
R=$OUT/r10; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/r10.tgz -C $OUT r10 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
el gpu_emu_tests; LD_LIBRARY_PATH=build/py-cuda-bundle/attest ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz timeout 100 build/devtests/gpu_emu_tests --gtest_output=json:$R/gpu_emu_tests.json > $R/gpu_emu_tests.log 2>&1; echo "gpu_emu_tests rc=$?"; grep -E "FAILED|PASSED" $R/gpu_emu_tests.log | head -5; pk
el lowp; OUT=$R BUDGET=175 timeout 185 scripts/device/run lowp -- --run sage,fp8 --shapes b1h40s32760d128 --seeds 2,3,4 > $R/lowp.log 2>&1; echo "lowp rc=$?"; grep -E -- "->" $R/lowp.log | tail -12; pk
el done
