#!/usr/bin/env bash
# Device call 3 of 2026-12-07 (session 7).
# 1. ncu on the fast device quantizers (issue 34: "where a goal is missed, ncu says what bounds
#    it"): the slowest scheme (smooth-K per_block=64: mean_stream_kernel + fast_kernel) and the
#    one-read per_block=128 scheme (0.43 of copy), b1h32s65536d128 as the benchmark.
#    (cut to two schemes and no operands timing: 309 s of device time were left after two failed starts)
set -u
R=$OUT/s7r3; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
pk() { tar czf $OUT/s7r3.tgz -C $OUT s7r3 2>/dev/null; }
nvidia-smi -L > $R/device.txt 2>&1
B=build/py-cuda-bundle/bin/bench_gpu_quantize
export LD_LIBRARY_PATH=build/py-cuda-bundle/lib:${LD_LIBRARY_PATH:-}
SEC=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats)
i=0
for S in int8:per_block=64:round=half:smooth=bf16 int8:per_block=128:round=half:prescale=sm_log2e; do
  i=$((i+1)); el ncu $S
  timeout 70 ncu "${SEC[@]}" -k regex:"fast_kernel|mean_stream_kernel|amax_fast_kernel" -c 2 $B b1h32s65536d128 --scheme $S --iters 1 > $R/ncu_quantize_fast_$i.txt 2>&1
  echo "rc=$?"; grep -E "^  [a-z_:]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible" $R/ncu_quantize_fast_$i.txt | head -24; pk
done
el done
