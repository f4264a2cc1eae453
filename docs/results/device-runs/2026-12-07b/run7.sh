#!/usr/bin/env bash
# Device call 4 of 2026-12-07 (session 3): the python-path job with the ftz judgement on the
# device engine (3d4cbab): the case file with device oracles first (casefile_s), then the other
# parts, the host-oracle case file last (it may hit the budget).
set -u
R=$OUT/r7; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/r7.tgz -C $OUT r7 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
el python-path; OUT=$R PARTS=casefile,cuda_build_gate,cuda_build_gate_device,spawned_closure_gate,pair_flash_cudnn,casefile_host BUDGET=${PP_BUDGET:-420} timeout 440 scripts/device/run python-path > $R/python_path.log 2>&1; echo "python-path rc=$?"; pk
tail -5 $R/python_path.log
el done
