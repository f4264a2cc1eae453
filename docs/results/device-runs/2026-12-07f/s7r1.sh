#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (session 7): check `operands` on the GPU at Wan 720p (b1h40s75600d128).
# 1. cuDNN FP8: control (cuDNN itself, its wrapper's E4M3 operands) + plant p_quantized_e5m2_not_e4m3,
#    operands only (--plant-checks none; the plant's accuracy verdict is wan/lowp_run9.json's)
# 2. Sage 1.0.6: control (sageattn itself, its own quantizer) + the two quantizer plants, operands only
#    (their accuracy verdicts are wan/lowp_run11.json's)

set -u
R=$OUT/s7r1; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s7r1.tgz -C $OUT s7r1 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
W=b1h40s75600d128
el fp8 plants; OUT=$R/fp8 BUDGET=110 timeout 120 scripts/device/run lowp -- --run fp8_plants --shapes $W --plant-checks none --plants p_quantized_e5m2_not_e4m3 > $R/fp8_plants.log 2>&1; echo "rc=$?"; grep -E "plant " $R/fp8_plants.log | cut -c1-500; pk
el sage plants; OUT=$R/sage BUDGET=150 timeout 160 scripts/device/run lowp -- --run sage_plants --shapes $W --plant-checks none --plants smooth_k_mean_over_one_block,last_partial_kv_block_scale_from_previous_block > $R/sage_plants.log 2>&1; echo "rc=$?"; grep -E "plant " $R/sage_plants.log | cut -c1-500; pk
el done
