#!/bin/bash
# The device side of a session's GPU checks, in one call (docs/runtime.md,
# "Checking on a GPU"): builds the runtime alone (no LLVM/MLIR there), runs
# tools/dev/gpu-check.py (CUDA against the CPU references) and the GPT-2
# benchmark against PyTorch eager and torch.compile from a folder that
# `bench.py --prepare` wrote (examples/gpt2/bench/bench.py). Everything was
# prepared here under carry/ (git-ignored; the device tool's `carry`):
#
#   /usr/bin/python3 tools/dev/gpu-check.py prepare --build build --carry carry
#   /usr/bin/python3 examples/gpt2/bench/bench.py --build build \
#       --prepare carry/gpt2-small          (any carry/gpt2-* folders)
#   mkdir -p carry/bin && cp build/tests/unit/runtime/step_cuda_tests \
#       carry/bin/                           (optional: the device tests)
#
# There: `bash tools/dev/gpu-session.sh` with OUT set (the device tool's
# output folder). At most 8 files come back, so each stage keeps its bulk
# under /tmp and leaves in OUT only: session.log (everything printed),
# build.log, gpu-check.json, bench.md (every benchmark's table) and per
# benchmark folder bench-<tag>.json and trace-<tag>.json (its profiled
# step): two benchmark folders at most, or four without traces (TRACES). Each stage has its own time limit; a failed stage is
# reported and the next one still runs. Exits non-zero when any failed.
set -u
OUT=${OUT:?set OUT to the folder that comes back}
CHECK_S=${CHECK_S:-180}
BENCH_S=${BENCH_S:-300}
# Benchmark folders (tags) whose torch.compile run is skipped, to fit a
# lease: e.g. SKIP_COMPILE="gpt2-small-f32". SKIP_TORCH: folders run by
# StepJIT alone (no PyTorch at all: plans compared with each other, e.g.
# --remat=max against none). TRACES: the folders whose trace comes back
# (default all; "none": none), to stay within the 8 files.
SKIP_COMPILE=${SKIP_COMPILE:-}
SKIP_TORCH=${SKIP_TORCH:-}
# TUNED: folders run once more by StepJIT alone with step-run
# --tune-matmuls (cuBLASLt's candidates timed, the fastest kept), into
# bench-<tag>-tuned.json (one more file back each).
TUNED=${TUNED:-}
TRACES=${TRACES:-all}
# NCU: kernel-name regexes (space-separated); after each benchmark, Nsight
# Compute profiles the first launch matching each in one step of that
# folder's plan, into ncu-<tag>.txt (one more file back).
NCU=${NCU:-}
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
status=0
stage() { echo "== $(date -u +%H:%M:%S) $*"; }

stage device
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem \
  --format=csv
nvcc --version | tail -1
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
nproc

# NCCL: the header travels in carry/include; the library is dlopen'ed
# (libnccl.so.2), wherever the image keeps it (PyTorch's pip package).
nccl=$(find /usr /opt -name 'libnccl.so.2*' 2>/dev/null | head -1)
libs=/usr/local/nvidia/lib64:/usr/local/cuda/lib64
[ -n "$nccl" ] && libs=$(dirname "$nccl"):$libs
export LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}
echo "libnccl: ${nccl:-none}"

stage build
inc=$PWD/carry/include
if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DSTEP_BUILD_COMPILER=OFF -DSTEP_BUILD_TESTS=OFF \
         -DSTEP_JSON_INCLUDE="$inc" -DSTEP_CLI11_INCLUDE="$inc" \
         -DSTEP_NCCL_INCLUDE="$inc" &&
       ninja -C build-gpu step-run; } > "$OUT/build.log" 2>&1; then
  grep -m 20 -B 2 -A 6 -i 'error' "$OUT/build.log" || tail -40 "$OUT/build.log"
  stage "build FAILED"
  exit 1
fi
grep -i 'StepJIT:' "$OUT/build.log"

stage gpu-check
timeout "$CHECK_S" python3 tools/dev/gpu-check.py run \
  --step-run build-gpu/tools/step-run --carry carry --out /tmp/check
rc=$?
cp /tmp/check/gpu-check.json "$OUT/" 2>/dev/null
[ $rc -ne 0 ] && { stage "gpu-check exited $rc"; status=1; }

# The runtime's device tests, where the binary was carried (it needs the
# compiler's build; tools/dev/gpu-check.py does not make it).
if [ -x carry/bin/step_cuda_tests ]; then
  stage "CudaDevice tests"
  timeout 120 carry/bin/step_cuda_tests --gtest_filter='CudaDevice*' \
    2>&1 | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|error' | tail -40
  [ "${PIPESTATUS[0]}" -ne 0 ] && { stage "CudaDevice tests failed"; status=1; }
fi

# The GPT-2 benchmarks, one per folder bench.py --prepare wrote.
for dir in carry/gpt2-*/; do
  [ -f "$dir/prepared.json" ] || continue
  tag=$(basename "$dir")
  stage "bench $tag"
  skip=()
  case " $SKIP_COMPILE " in *" $tag "*) skip=(--skip-compile) ;; esac
  case " $SKIP_TORCH " in *" $tag "*) skip=(--skip-torch) ;; esac
  PYTHONUNBUFFERED=1 timeout "$BENCH_S" python3 examples/gpt2/bench/bench.py \
    --build build-gpu --prepared "$dir" --workdir "/tmp/bench-$tag" \
    --no-compile-warm ${skip[@]+"${skip[@]}"} --out "$OUT/bench-$tag.json" \
    --markdown "$OUT/bench.md" > "/tmp/bench-$tag.log" 2>&1
  rc=$?
  grep -v '^ ' "/tmp/bench-$tag.log" | grep -v '^[{}]' | tail -45
  case " $TRACES " in
    *" all "*|*" $tag "*)
      cp "/tmp/bench-$tag/trace.json" "$OUT/trace-$tag.json" 2>/dev/null ;;
  esac
  [ $rc -ne 0 ] && { stage "bench $tag exited $rc"; tail -30 "/tmp/bench-$tag.log"; status=1; }
  for re in $NCU; do
    stage "ncu $tag $re"
    timeout 120 ncu --clock-control none --section SpeedOfLight \
      --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      -k "regex:$re" --launch-count 1 build-gpu/tools/step-run \
      "$dir/train.step" --params "/tmp/bench-$tag/params" \
      --inputs "$dir/inputs" --steps 1 --backend cuda \
      >> "$OUT/ncu-$tag.txt" 2>&1 || { stage "ncu $re failed"; status=1; }
  done
  case " $TUNED " in
    *" $tag "*)
      stage "bench $tag --tune-matmuls"
      PYTHONUNBUFFERED=1 timeout "$BENCH_S" python3 examples/gpt2/bench/bench.py \
        --build build-gpu --prepared "$dir" --workdir "/tmp/bench-$tag-tuned" \
        --skip-torch --step-run-flag=--tune-matmuls \
        --out "$OUT/bench-$tag-tuned.json" --markdown "$OUT/bench.md" \
        > "/tmp/bench-$tag-tuned.log" 2>&1 ||
        { stage "tuned bench $tag failed"; tail -30 "/tmp/bench-$tag-tuned.log"; status=1; }
      grep -E '^\| StepJIT' "/tmp/bench-$tag-tuned.log" | head -2
      rm -rf "/tmp/bench-$tag-tuned/params" ;;
  esac
  rm -rf "/tmp/bench-$tag/params" # 0.5 GB of drawn params
done
stage "done (status $status)"
exit $status
