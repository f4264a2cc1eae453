#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (session 5), ordered for a short budget. c = the committed gpu.ref64
# (9d733a2: table exp in base e, 16-key tiles; never on a GPU before); n = the working tree (f64 at
# head_dim 128: 32-key tiles, K and V single buffers refilled at different points of the tile; V
# check by copy ownership). Benchmark c vs n alternated (f64 two rounds), torch fp64, gpu_tests of
# n (Ref64 first, then whole), f32 / causal_br, compute-sanitizer on n's Ref64 tests.
set -u
R=$OUT/s5r1; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s5r1.tgz -C $OUT s5r1 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1; nvidia-smi --query-gpu=clocks.max.sm,driver_version --format=csv >> $R/device.txt 2>&1
B=build/ref64-s5
el ref64
for i in 1 2; do for v in c n; do timeout 25 $B/bench_$v b1h24s8192d128 --iters 10 --json $R/f64_${v}_$i.json > $R/bench_f64_${v}_$i.log 2>&1; done; done
for f in $R/f64*.json; do echo "$(basename $f) $(grep -o '"tflops"[^,}]*' $f | head -1)"; done; pk
el torch; timeout 45 python3 scripts/device/harness.py torch-fp64 $R > $R/torch.log 2>&1; tail -1 $R/torch.log | grep -o '"tflops": [0-9.]*'; pk
el gpu_tests n Ref64; timeout 40 $B/gpu_tests_n --gtest_filter='*Ref64*' > $R/gpu_tests_n_ref64.log 2>&1; echo "rc=$?"; grep -E "FAILED|PASSED|tests ran" $R/gpu_tests_n_ref64.log | head; pk
el gpu_tests n; timeout 100 $B/gpu_tests_n > $R/gpu_tests_n.log 2>&1; echo "gpu_tests_n rc=$?"; grep -E "FAILED|PASSED|tests ran" $R/gpu_tests_n.log | head; pk
for v in c n; do timeout 25 $B/bench_$v b1h24s8192d128 --dtype f32 --iters 10 --json $R/f32_$v.json > $R/bench_f32_$v.log 2>&1; done
for v in c n; do timeout 25 $B/bench_$v b1h24s8192d128:mask=causal_br --iters 5 --json $R/causal_$v.json > $R/bench_causal_$v.log 2>&1; done
for f in $R/f32*.json $R/causal*.json; do echo "$(basename $f) $(grep -o '"tflops"[^,}]*' $f | head -1)"; done; pk
el gpu_tests c; timeout 40 $B/gpu_tests_c --gtest_filter='*Ref64*' > $R/gpu_tests_c.log 2>&1; echo "gpu_tests_c rc=$?"; grep -E "FAILED|PASSED|tests ran" $R/gpu_tests_c.log | head; pk
el sanitizer
for t in racecheck memcheck synccheck; do timeout 35 compute-sanitizer --tool $t $B/gpu_tests_n --gtest_filter='*Ref64*' > $R/sanitizer_$t.log 2>&1; echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_$t.log | tail -1)"; done; pk
el done
