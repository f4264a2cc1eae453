#!/usr/bin/env bash
# Device call 2 of 2026-12-07 (session 3): gpu_tests of the software-pipelined ref64 (k8);
# ref64 old k8 vs pipe k8 vs pipe k16, alternated, f64 and f32 inputs, and causal.
set -u
R=$OUT/r5; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/r5.tgz -C $OUT r5 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
B=build/ref64-k
el gpu_tests; timeout 150 $B/gpu_tests_pipe_k8 --gtest_output=json:$R/gpu_tests.json > $R/gpu_tests.log 2>&1; echo "gpu_tests rc=$?" | tee -a $R/rc.txt; grep -E "FAILED|PASSED" $R/gpu_tests.log | head; pk
el ref64
for i in 1 2; do
  for v in k8 pipe_k8 pipe_k16; do
    timeout 40 $B/bench_$v b1h24s8192d128 --iters 10 --json $R/f64_${v}_$i.json > /dev/null 2>&1
    timeout 40 $B/bench_$v b1h24s8192d128 --dtype f32 --iters 10 --json $R/f32_${v}_$i.json > /dev/null 2>&1
  done
done
for v in k8 pipe_k8 pipe_k16; do timeout 40 $B/bench_$v b1h24s8192d128:mask=causal_br --iters 5 --json $R/causal_${v}.json > /dev/null 2>&1; done
for f in $R/*.json; do case $f in *gpu_tests*) continue;; esac; echo "$(basename $f) $(grep -o '"tflops": [0-9.]*' $f)"; done | tee $R/tflops.txt; pk
el ncu; timeout 200 ncu --kernel-name regex:ref64_mma --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats $B/bench_pipe_k8 b1h24s4096d128 --iters 1 > $R/ncu_pipe_k8.txt 2>&1; echo "ncu rc=$?" | tee -a $R/rc.txt; pk
el done
