#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (session 3): gpu_tests of the m16n8k16 ref64 build; ref64 k16 vs
# k8 (the committed kernel) alternated at b1h24s8192d128 and causal; torch fp64 in the same call;
# ncu on the k16 kernel.
set -u
R=$OUT/r4; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/r4.tgz -C $OUT r4 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $R/device.txt 2>&1
B=build/ref64-k
el gpu_tests; timeout 150 $B/gpu_tests_k16 --gtest_output=json:$R/gpu_tests.json > $R/gpu_tests.log 2>&1; echo "gpu_tests rc=$?" | tee -a $R/rc.txt; tail -3 $R/gpu_tests.log; pk
el ref64
for i in 1 2; do
  for v in k8 k16; do timeout 40 $B/bench_$v b1h24s8192d128 --iters 10 --json $R/ref64_${v}_$i.json > $R/ref64_${v}_$i.log 2>&1; done
done
for v in k8 k16; do timeout 40 $B/bench_$v b1h24s8192d128:mask=causal_br --iters 5 --json $R/ref64_${v}_causal.json > /dev/null 2>&1; done
grep -ho '"tflops"[^,]*' $R/ref64_*.json; ls $R; pk
el torch; timeout 120 python3 scripts/device/harness.py torch-fp64 $R > $R/torch.log 2>&1; echo "torch rc=$?" | tee -a $R/rc.txt; tail -2 $R/torch.log; pk
el ncu; timeout 200 ncu --kernel-name regex:ref64_mma --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats --section SchedulerStats $B/bench_k16 b1h24s4096d128 --iters 1 > $R/ncu_k16.txt 2>&1; echo "ncu rc=$?" | tee -a $R/rc.txt; pk
el done
