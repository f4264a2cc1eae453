#!/usr/bin/env bash
# Device call 6 of 2026-12-07 (session 3): gpu_emu_tests (floor twin and unrounded outputs of
# gpu.emu, 7938375; the engine's device emulator against the host one, f53c4d9); the case file on
# the engine with gpu.emu as its emulator and zero-input refusal variants (36e01d1); Sage at Wan
# 720p through the device emulator path.
set -u
R=$OUT/r9; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/r9.tgz -C $OUT r9 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1; nproc >> $R/device.txt
el gpu_emu_tests; LD_LIBRARY_PATH=build/py-cuda-bundle/attest ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz timeout 120 build/devtests/gpu_emu_tests --gtest_output=json:$R/gpu_emu_tests.json > $R/gpu_emu_tests.log 2>&1; echo "gpu_emu_tests rc=$?"; grep -E "FAILED|PASSED|tests ran" $R/gpu_emu_tests.log | head -12; pk
el python-path; OUT=$R PARTS=casefile BUDGET=110 timeout 120 scripts/device/run python-path > $R/python_path.log 2>&1; echo "python-path rc=$?"; grep "^==" $R/python_path.log | cut -c1-300; pk
el lowp; OUT=$R BUDGET=160 timeout 170 scripts/device/run lowp -- --run sage,plants --shapes b1h40s75600d128 > $R/lowp.log 2>&1; echo "lowp rc=$?"; grep -E "^\[|->" $R/lowp.log | tail -4; pk
el done
