#!/usr/bin/env bash
# Device call 5 of 2026-12-07 (session 3): the case file after the ftz zero-bound fix (2bdb1b8),
# its rows dumped (where the seconds go); then the lowp job: Sage 1.0.6 and cuDNN FP8 under their
# recipes at Wan 720p / 480p on the engine that takes quantized recipes (580f6d1).
set -u
R=$OUT/r8; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/r8.tgz -C $OUT r8 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1; nproc >> $R/device.txt
el python-path; OUT=$R PARTS=casefile BUDGET=130 timeout 140 scripts/device/run python-path > $R/python_path.log 2>&1; echo "python-path rc=$?"; grep "^==" $R/python_path.log | cut -c1-400; pk
el lowp; OUT=$R BUDGET=${LOWP_BUDGET:-330} timeout 345 scripts/device/run lowp > $R/lowp.log 2>&1; echo "lowp rc=$?"; grep -E "^\[|->" $R/lowp.log | tail -12; pk
el done
