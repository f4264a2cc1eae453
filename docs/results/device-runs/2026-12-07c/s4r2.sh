#!/usr/bin/env bash
# Device call 2 of 2026-12-07 (session 4): gpu_tests of the kernel to commit (e2: base-2 softmax,
# table exp2, the loop in place; the ping-pong variant of call 1 was slower); e2 vs k8 again with
# torch fp64 in the same call; the case file on the e2 bundle.
set -u
R=$OUT/s4r2; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s4r2.tgz -C $OUT s4r2 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
B=build/ref64-s4
el gpu_tests; timeout 100 $B/gpu_tests_e2 > $R/gpu_tests.log 2>&1; echo "gpu_tests rc=$?"; grep -E "FAILED|PASSED|tests ran" $R/gpu_tests.log | head; pk
el ref64
for i in 1 2; do for v in k8 e2; do timeout 40 $B/bench_$v b1h24s8192d128 --iters 10 --json $R/f64_${v}_$i.json > /dev/null 2>&1; done; done
for v in k8 e2; do timeout 40 $B/bench_$v b1h24s8192d128 --dtype f32 --iters 10 --json $R/f32_${v}.json > /dev/null 2>&1; done
for f in $R/f*.json; do echo "$(basename $f) $(grep -o '"tflops"[^,}]*' $f | head -1)"; done; pk
el torch; timeout 60 python3 scripts/device/harness.py torch-fp64 $R > $R/torch.log 2>&1; tail -1 $R/torch.log | grep -o '"tflops": [0-9.]*'; pk
el python-path; OUT=$R PARTS=casefile BUDGET=80 timeout 90 scripts/device/run python-path > $R/python_path.log 2>&1; echo "python-path rc=$?"; grep "^== casefile" $R/python_path.log | cut -c1-260; pk
el done
