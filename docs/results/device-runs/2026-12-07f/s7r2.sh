#!/usr/bin/env bash
# Device call 2 of 2026-12-07 (session 7), on the warm machine of s7r1: check `operands` beside the
# whole sage job at Wan 720p (dist normal: the job's default fill), and the plants at 480p.
set -u
R=$OUT/s7r2; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s7r2.tgz -C $OUT s7r2 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
W=b1h40s75600d128; P=b1h40s32760d128
el sage wan operands; OUT=$R/sage_wan BUDGET=100 timeout 110 scripts/device/run lowp -- --run sage --sage-operands --shapes $W > $R/sage_wan.log 2>&1; echo "rc=$?"; grep -E "^\[|->" $R/sage_wan.log | cut -c1-300 | tail -4; pk
el sage plants 480p; OUT=$R/sage_480 BUDGET=90 timeout 100 scripts/device/run lowp -- --run sage_plants --shapes $P --plant-checks none --plants smooth_k_mean_over_one_block,last_partial_kv_block_scale_from_previous_block > $R/sage_480.log 2>&1; echo "rc=$?"; grep -E "plant " $R/sage_480.log | cut -c1-300; pk
el fp8 plants 480p; OUT=$R/fp8_480 BUDGET=70 timeout 80 scripts/device/run lowp -- --run fp8_plants --shapes $P --plant-checks none --plants p_quantized_e5m2_not_e4m3 > $R/fp8_480.log 2>&1; echo "rc=$?"; grep -E "plant " $R/fp8_480.log | cut -c1-300; pk
el done
