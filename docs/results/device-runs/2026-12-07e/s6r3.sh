#!/usr/bin/env bash
# Device call of 2026-12-07 (session 6), cut to the device time left (about 300 s with the start):
# the unplanted control (sageattn 1.0.6 itself, its own quantizer under check `operands`) and the
# two Sage quantizer plants meant for `operands`, at Wan 720p, diffusion fill, seed 1; operands
# only (--plant-checks none): their accuracy verdicts are those of wan/lowp_run11.json.
set -u
R=$OUT/s6r3; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s6r3.tgz -C $OUT s6r3 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
el plants wan; OUT=$R/wan BUDGET=140 timeout 150 scripts/device/run lowp -- --run sage_plants --shapes b1h40s75600d128 --plant-checks none --plants smooth_k_mean_over_one_block,last_partial_kv_block_scale_from_previous_block > $R/plants_wan.log 2>&1; echo "rc=$?"; grep -E "plant " $R/plants_wan.log | cut -c1-500; pk
el done
