# Shared shell library of scripts/device (sourced by `run` and `build`; not executable itself).
#   bundle environment   use_device_bundle / use_py_cuda_bundle / use_synth_bundle: LD_LIBRARY_PATH,
#                        ATTEST_RCP_SM90_TABLE (the measured rcp_sm90 table the bundle carries), PYTHONPATH
#   wheels               install_wheels WHEEL_GLOB...: the carried wheels into /tmp/site (nothing can be
#                        fetched on the GPU machine), PYTHONPATH=/tmp/site
#   timed steps          step_init DIR [BUDGET MIN_LEFT KILL_AFTER TAIL FAIL_TAIL]; step NAME LIMIT CMD...
#   results              pack FOLDER [keep] [ARCHIVE]: $OUT/FOLDER -> $OUT/ARCHIVE.tgz (split in 15 MiB
#                        parts when bigger: the device tool brings back a few files of <= 16 MiB each)
#   bundle checks        carry_libs BIN_OR_LIB DEST SYSTEM_REGEX: copies what ldd finds beyond the C/C++ runtime
# shellcheck shell=bash

DEV_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RCP_TABLE_REL=data/rcp_sm90_ulpdiff.i8.gz  # inside every bundle; reference/data/ in the repository

say() { echo "$DEV_JOB: $*"; }
die() { echo "$DEV_JOB: $*" >&2; exit "${2:-1}"; }
need_out() { [ -n "${OUT:-}" ] || { echo "$DEV_JOB: OUT must name the results folder" >&2; return 2; }; }

# ---- bundle environment ----------------------------------------------------------------------
# The C++ bundle (build/device-bundle; DEVICE_BUNDLE overrides): bin/, lib/ (libraries the image
# lacks), data/ (the rcp_sm90 table). Sets BUNDLE to its absolute path.
use_device_bundle() {
  local b=${DEVICE_BUNDLE:-build/device-bundle}
  BUNDLE=$(cd "$b" 2>/dev/null && pwd) || { echo "$DEV_JOB: no bundle folder $b (scripts/device/build device)" >&2; return 2; }
  export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export ATTEST_RCP_SM90_TABLE="$BUNDLE/$RCP_TABLE_REL"
}

# The CUDA Python bundle (build/py-cuda-bundle): attest/ with the CUDA libattest_py.so and its
# libraries, cloudpickle/, bin/ (benchmarks), data/. Sets BUNDLE (relative, as the drivers expect).
use_py_cuda_bundle() {
  BUNDLE=build/py-cuda-bundle
  [ -d "$BUNDLE" ] || { echo "$DEV_JOB: no bundle folder $BUNDLE (scripts/device/build py-cuda)" >&2; return 2; }
  export PYTHONPATH=$BUNDLE PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$BUNDLE/attest:${LD_LIBRARY_PATH:-}
  export ATTEST_RCP_SM90_TABLE=$BUNDLE/$RCP_TABLE_REL
}

# The e2e synth bundle (build/synth-bundle; SYNTH_BUNDLE overrides): bin/attest_synth_runs.
use_synth_bundle() {
  BUNDLE=${SYNTH_BUNDLE:-build/synth-bundle}
  [ -d "$BUNDLE" ] || { echo "$DEV_JOB: no bundle folder $BUNDLE (scripts/device/build synth)" >&2; return 2; }
}

# ---- wheels ----------------------------------------------------------------------------------
# install_wheels GLOB...: the carried wheels (build/python-bundle, .whl) into /tmp/site, no index,
# no dependencies (the GPU machine has torch, triton, numpy and can fetch nothing).
install_wheels() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$@" || return 1
  export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
}
PY_BUNDLE_WHEELS=(build/python-bundle/attest-*.whl build/python-bundle/cloudpickle-*.whl)
SAGE_WHEEL=(.whl/sageattention-*.whl)
CUDNN_FE_WHEEL=(.whl/nvidia_cudnn_frontend-*.whl)

# ---- timed steps -----------------------------------------------------------------------------
# step_init DIR [BUDGET MIN_LEFT KILL_AFTER TAIL FAIL_TAIL]: where the logs go; BUDGET seconds for
# all steps from now (0: none), a step is skipped with less than MIN_LEFT left and its limit is
# clipped to what is left; KILL_AFTER for timeout; TAIL lines of each log printed, FAIL_TAIL of a
# failed step's. step NAME LIMIT CMD...: CMD with stdout+stderr into DIR/NAME.log; a failing step
# never stops the next. Records: STEP_RCS (name=rc), STEP_JSON (summary.json's steps), STEP_FAILED.
step_init() {
  STEP_DIR=$1 STEP_BUDGET=${2:-0} STEP_MIN=${3:-0} STEP_KILL=${4:-10} STEP_TAIL=${5:-5} STEP_FAIL_TAIL=${6:-${5:-5}}
  STEP_T0=$SECONDS
  STEP_RCS=() STEP_JSON=() STEP_FAILED=()
  mkdir -p "$STEP_DIR"
}
step_left() { echo $((STEP_BUDGET - (SECONDS - STEP_T0))); }
step() {
  local name=$1 limit=$2 t0=$SECONDS rc=0 left
  shift 2
  if [ "$STEP_BUDGET" -gt 0 ]; then
    left=$(step_left)
    if [ "$left" -lt "$STEP_MIN" ]; then
      echo "== $name: skipped (time budget spent)"
      STEP_RCS+=("$name=skipped") STEP_FAILED+=("$name(skipped)")
      STEP_JSON+=("{\"step\": \"$name\", \"rc\": null, \"seconds\": 0, \"skipped\": true}")
      return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
  fi
  echo "== $name (<= $limit s): $*"
  timeout --kill-after="$STEP_KILL" "$limit" "$@" >"$STEP_DIR/$name.log" 2>&1 || rc=$?
  echo "   rc=$rc ($((SECONDS - t0)) s)$([ "$rc" -eq 124 ] && echo ", TIMED OUT after $limit s")"
  if [ "$rc" -ne 0 ]; then
    STEP_FAILED+=("$name")
    tail -n "$STEP_FAIL_TAIL" "$STEP_DIR/$name.log" | sed 's/^/   | /'
  elif [ "$STEP_TAIL" -gt 0 ]; then
    tail -n "$STEP_TAIL" "$STEP_DIR/$name.log" | sed 's/^/   | /'
  fi
  STEP_RCS+=("$name=$rc")
  STEP_JSON+=("{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $((SECONDS - t0))}")
  return 0
}

# ---- results ---------------------------------------------------------------------------------
# pack FOLDER [keep|drop] [ARCHIVE]: $OUT/FOLDER into $OUT/ARCHIVE.tgz (ARCHIVE defaults to FOLDER),
# split into ARCHIVE.tgz.part-aa, -ab, ... over 15 MiB (`cat` them back). keep leaves the folder
# (a later job of the same call may read it, e.g. fp8 reads probe/limits.json); drop removes it.
pack() {
  local f=$1 mode=${2:-keep} a=${3:-$1}
  [ -d "$OUT/$f" ] || return 0
  (cd "$OUT" && tar czf "$a.tgz" "$f") || return 1
  [ "$mode" = drop ] && rm -rf "${OUT:?}/$f"
  if [ "$(stat -c %s "$OUT/$a.tgz")" -gt $((15 * 1024 * 1024)) ]; then
    split -b 15M "$OUT/$a.tgz" "$OUT/$a.tgz.part-" && rm "$OUT/$a.tgz"
  fi
  return 0
}

# ---- bundle building (here) ------------------------------------------------------------------
# carry_libs FILE DEST SYSTEM_REGEX: every library FILE loads beyond SYSTEM_REGEX (the C/C++
# runtime the GPU machine's image has) is copied into DEST; exit 1 when one is not found here.
carry_libs() {
  local b=$1 dest=$2 system=$3 name path
  while read -r name path; do
    [[ "$name" =~ $system ]] && continue
    if [ -z "$path" ] || [ ! -f "$path" ]; then
      echo "$DEV_JOB: $(basename "$b") needs $name, which is not found here" >&2
      return 1
    fi
    cp -L -n "$path" "$dest/$name"
  done < <(ldd "$b" | awk '$2 == "=>" {print $1, $3} $2 != "=>" {print $1, ""}' | sed 's#^/.*/##')
}

# write_commit BUNDLE: the suite commit (and whether the working tree differed) into BUNDLE/COMMIT.
write_commit() {
  git rev-parse HEAD >"$1/COMMIT" 2>/dev/null || true
  if ! git diff --quiet HEAD -- . 2>/dev/null; then echo "(working tree differed from HEAD)" >>"$1/COMMIT"; fi
}
