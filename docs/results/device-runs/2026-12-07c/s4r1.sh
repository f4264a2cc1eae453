#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (session 4): gpu_tests of the ping-pong ref64 build (pp: base-2
# softmax with a table exp2 + two warp groups in alternating phases); ref64 k8 (the kernel in
# place) vs e2 (base-2 softmax only) vs pp alternated at b1h24s8192d128 (f64, f32) and causal;
# torch fp64 in the same call; gpu_emu_tests and the case file on 3ccca6a's engine with pp; the
# three Sage-internal plants at Wan 720p (sage_plants.py).
set -u
R=$OUT/s4r1; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s4r1.tgz -C $OUT s4r1 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $R/device.txt 2>&1
B=build/ref64-s4
el gpu_tests; timeout 150 $B/gpu_tests_pp --gtest_output=json:$R/gpu_tests.json > $R/gpu_tests.log 2>&1; echo "gpu_tests rc=$?" | tee -a $R/rc.txt; grep -E "FAILED|PASSED" $R/gpu_tests.log | head -20; pk
el sanitizer; for t in racecheck synccheck; do timeout 60 compute-sanitizer --tool $t $B/bench_pp b1h2s300d128 --iters 1 > $R/sanitizer_$t.log 2>&1; echo "$t rc=$?" | tee -a $R/rc.txt; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" $R/sanitizer_$t.log | head -3; done
timeout 60 compute-sanitizer --tool racecheck $B/bench_pp b1h2s300d128:mask=causal_br --iters 1 > $R/sanitizer_racecheck_causal.log 2>&1; echo "racecheck causal rc=$?"; grep -E "SUMMARY" $R/sanitizer_racecheck_causal.log | head -2; pk
el ref64
for i in 1 2; do
  for v in k8 e2 pp; do
    timeout 40 $B/bench_$v b1h24s8192d128 --iters 10 --json $R/f64_${v}_$i.json > $R/f64_${v}_$i.log 2>&1
    [ $i = 1 ] && timeout 40 $B/bench_$v b1h24s8192d128 --dtype f32 --iters 10 --json $R/f32_${v}_$i.json > /dev/null 2>&1
  done
done
for v in k8 pp; do timeout 40 $B/bench_$v b1h24s8192d128:mask=causal_br --iters 5 --json $R/causal_${v}.json > /dev/null 2>&1; done
for f in $R/*.json; do echo "$(basename $f) $(grep -o '"tflops"[^,}]*' $f | head -1)"; done; pk
el torch; timeout 120 python3 scripts/device/harness.py torch-fp64 $R > $R/torch.log 2>&1; echo "torch rc=$?" | tee -a $R/rc.txt; tail -2 $R/torch.log; pk
el gpu_emu_tests; LD_LIBRARY_PATH=build/py-cuda-bundle/attest timeout 120 build/devtests/gpu_emu_tests --gtest_output=json:$R/gpu_emu_tests.json > $R/gpu_emu_tests.log 2>&1; echo "gpu_emu_tests rc=$?" | tee -a $R/rc.txt; grep -E "FAILED|PASSED" $R/gpu_emu_tests.log | head -12; pk
el python-path; OUT=$R PARTS=casefile BUDGET=110 timeout 120 scripts/device/run python-path > $R/python_path.log 2>&1; echo "python-path rc=$?" | tee -a $R/rc.txt; grep "^==" $R/python_path.log | cut -c1-300; pk
el lowp; OUT=$R BUDGET=200 timeout 210 scripts/device/run lowp -- --run sage_plants --shapes b1h40s75600d128 > $R/lowp.log 2>&1; echo "lowp rc=$?" | tee -a $R/rc.txt; grep -E "^\[|->|plant" $R/lowp.log | tail -8; pk
el done
