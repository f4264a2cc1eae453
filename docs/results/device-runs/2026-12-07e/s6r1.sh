#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (session 6): the committed gpu.ref64 of HEAD (own_nonfinite by copy
# ownership, piece width shared with copy_kv_tile) and check_subnormal's device path had not run
# on a GPU. gpu_tests Ref64 + whole, compute-sanitizer (memcheck, synccheck, racecheck) on Ref64,
# bench f64 / f32 / causal_br, torch fp64 in the same call.
set -u
R=$OUT/s6r1; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s6r1.tgz -C $OUT s6r1 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1; nvidia-smi --query-gpu=clocks.max.sm,driver_version --format=csv >> $R/device.txt 2>&1
B=build/ref64-s6
el gpu_tests Ref64; timeout 40 $B/gpu_tests --gtest_filter='*Ref64*' > $R/gpu_tests_ref64.log 2>&1; echo "rc=$?"; grep -E "FAILED|PASSED|tests ran" $R/gpu_tests_ref64.log | head; pk
el gpu_tests; timeout 120 $B/gpu_tests > $R/gpu_tests.log 2>&1; echo "gpu_tests rc=$?"; grep -E "FAILED|PASSED|tests ran" $R/gpu_tests.log | head; pk
el bench
for i in 1 2; do timeout 25 $B/bench_gpu_ref64 b1h24s8192d128 --iters 10 --json $R/f64_$i.json > $R/bench_f64_$i.log 2>&1; done
timeout 25 $B/bench_gpu_ref64 b1h24s8192d128 --dtype f32 --iters 10 --json $R/f32.json > $R/bench_f32.log 2>&1
timeout 25 $B/bench_gpu_ref64 b1h24s8192d128:mask=causal_br --iters 5 --json $R/causal.json > $R/bench_causal.log 2>&1
for f in $R/*.json; do echo "$(basename $f) $(grep -o '"tflops"[^,}]*' $f | head -1)"; done; pk
el torch; timeout 45 python3 scripts/device/harness.py torch-fp64 $R > $R/torch.log 2>&1; tail -1 $R/torch.log | grep -o '"tflops": [0-9.]*'; pk
el sanitizer
for t in memcheck synccheck racecheck; do timeout 60 compute-sanitizer --tool $t $B/gpu_tests --gtest_filter='*Ref64*' > $R/sanitizer_$t.log 2>&1; echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_$t.log | tail -1)"; done; pk
el done
