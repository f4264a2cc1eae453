#!/usr/bin/env bash
# Ad-hoc device run (not committed): GPU tests of the new ref64 + merged device code, ref64 old vs
# new side by side, the torch-only SDPA repro, the python-path job.
set -u
R=$OUT/r; mkdir -p $R
export ATTEST_RCP_SM90_TABLE=$PWD/reference/data/rcp_sm90_ulpdiff.i8.gz
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi -L > $R/device.txt 2>&1; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $R/device.txt 2>&1
el gpu_tests; timeout 150 build/cuda/kernels/gpu/gpu_tests --gtest_output=json:$R/gpu_tests.json > $R/gpu_tests.log 2>&1; echo "gpu_tests rc=$?" | tee -a $R/rc.txt
el q34_gpu_tests; timeout 150 build/q34/gpu_tests --gtest_output=json:$R/q34_gpu_tests.json > $R/q34_gpu_tests.log 2>&1; echo "q34_gpu_tests rc=$?" | tee -a $R/rc.txt
el ref64
for i in 1 2; do
  timeout 40 build/ref64-var/bench_final b1h24s8192d128 --iters 10 --json $R/ref64_old_$i.json > $R/ref64_old_$i.log 2>&1
  timeout 40 build/py-cuda-bundle/bin/bench_gpu_ref64 b1h24s8192d128 --iters 10 --json $R/ref64_new_$i.json > $R/ref64_new_$i.log 2>&1
done
timeout 40 build/ref64-var/bench_final b1h24s8192d128:mask=causal_br --iters 5 --json $R/ref64_old_causal.json > /dev/null 2>&1
timeout 40 build/py-cuda-bundle/bin/bench_gpu_ref64 b1h24s8192d128:mask=causal_br --iters 5 --json $R/ref64_new_causal.json > /dev/null 2>&1
grep -h tflops $R/ref64_*.json | cut -c1-200
el repro; timeout 120 python3 docs/results/python-path/repro_sdpa_unaligned.py $R/repro.json > $R/repro.log 2>&1; echo "repro rc=$?" | tee -a $R/rc.txt
el quantize; timeout 90 build/py-cuda-bundle/bin/bench_gpu_quantize b1h32s65536d128 --iters 10 --json $R/quant_old.json > $R/quant_old.log 2>&1; echo "quant_old rc=$?" | tee -a $R/rc.txt
timeout 90 build/q34/bench_gpu_quantize b1h32s65536d128 --iters 10 --json $R/quant_new.json > $R/quant_new.log 2>&1; echo "quant_new rc=$?" | tee -a $R/rc.txt
el python-path; OUT=$R BUDGET=${PP_BUDGET:-240} timeout 260 scripts/device/run python-path > $R/python_path.log 2>&1; echo "python-path rc=$?" | tee -a $R/rc.txt
el done
tail -5 $R/python_path.log
