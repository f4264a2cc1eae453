#!/usr/bin/env bash
# Device call 3 of 2026-12-07 (session 4): false-alarm seeds for issue 34: sageattention 1.0.6 at
# Wan 480p (b1h40s32760d128), seeds 5-14, every row against FP64 + determinism + call_path.
set -u
R=$OUT/s4r3; mkdir -p $R
nvidia-smi -L > $R/device.txt 2>&1
OUT=$R BUDGET=185 timeout 195 scripts/device/run lowp -- --run sage --shapes b1h40s32760d128 --seeds 5,6,7,8,9,10,11,12,13,14 > $R/lowp.log 2>&1; echo "lowp rc=$?"
grep -E "\->|passed|failed" $R/lowp.log | tail -14 | cut -c1-200
tar czf $OUT/s4r3.tgz -C $OUT s4r3
