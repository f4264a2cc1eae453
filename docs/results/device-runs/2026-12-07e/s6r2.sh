#!/usr/bin/env bash
# Device call 2 of 2026-12-07 (session 6): check `operands` (conformance/operands.hpp) on the GPU.
# 1. the Sage-internal plants at Wan 720p (sage_plants.py; control first: sageattn itself, its own
#    quantizer under operands), each judged by accuracy and operands;
# (the short-shape plants of the first draft, b1h40s272d128, were cut: device time)
# 2. sageattn's own quantizer under operands at Wan 720p (a false alarm would show here), diffusion fill.
set -u
R=$OUT/s6r2; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s6r2.tgz -C $OUT s6r2 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
el plants wan; OUT=$R/wan BUDGET=210 timeout 220 scripts/device/run lowp -- --run sage_plants --shapes b1h40s75600d128 > $R/plants_wan.log 2>&1; echo "rc=$?"; grep -E "plant " $R/plants_wan.log | cut -c1-400; pk
el sage operands; OUT=$R/fa BUDGET=100 timeout 110 scripts/device/run lowp -- --run sage --sage-operands --dist diffusion --shapes b1h40s75600d128 > $R/sage_fa.log 2>&1; echo "rc=$?"; grep -E "^\[|->" $R/sage_fa.log | cut -c1-300 | tail -6; pk
el done
