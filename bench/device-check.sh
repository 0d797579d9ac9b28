#!/usr/bin/env bash
# bench/device-check.sh: the CUDA backend's checks on a GPU machine, in one
# run that writes one log with a table (docs/gpu.md).
#
#   bench/device-check.sh prepare [DIR] [--models a,b,..] [--no-medium]
#                                 [--large SHAPE | --no-large]
#       Here, with a build of tp-opt: the generated C++ (tpc --emit cpp) of
#       the test models (forward and training), of the benchmark's medium
#       Llama and of the large model (bench/large: a Llama-3.2-1B-shaped
#       graph, or SHAPE `tiny`), into DIR (default .device-check/,
#       git-ignored).
#   bench/device-check.sh run [DIR] [--cpu-only] [--build B] [--iters N]
#                             [--no-torch-compile]
#       On the GPU machine, which needs only this working tree, CMake, a C++
#       compiler, MPI, OpenBLAS, the CUDA toolkit with NCCL, and Python with
#       numpy (torch for the PyTorch rows): builds the runtime alone
#       (cmake -S runtime) with the programs of DIR, runs every test model's
#       reference inputs on the CPU and the GPU backend against the PyTorch
#       logits and each other, three training steps of each against the
#       PyTorch run, and times the medium Llama's forward and training step
#       against PyTorch eager and the large model's against PyTorch eager
#       and torch.compile (--no-torch-compile: eager only, a rerun that
#       must be short). --cpu-only builds without CUDA and with
#       OpenBLAS (as a GPU machine without oneDNN does) and runs the CPU
#       side (CI). Writes DIR/device-check.log; exits non-zero when a check
#       fails.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  sed -n '4,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
mode=$1
shift
dir=$root/.device-check
if [ $# -ge 1 ] && [[ $1 != --* ]]; then
  dir=$1
  shift
fi
models=llama,qwen2,qwen3,gemma3,nemotron_h
medium=1
large=llama-3.2-1b
cpu_only=0
build=
iters=30
torch_compile=1
while [ $# -gt 0 ]; do
  case "$1" in
  --models) [ $# -ge 2 ] || usage; models=$2; shift 2 ;;
  --no-medium) medium=0; shift ;;
  --large) [ $# -ge 2 ] || usage; large=$2; shift 2 ;;
  --no-large) large=; shift ;;
  --cpu-only) cpu_only=1; shift ;;
  --build) [ $# -ge 2 ] || usage; build=$2; shift 2 ;;
  --iters) [ $# -ge 2 ] || usage; iters=$2; shift 2 ;;
  --no-torch-compile) torch_compile=0; shift ;;
  *) echo "device-check.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

case "$mode" in
prepare)
  tpc=${TPC:-$(command -v tpc || echo "$root/build/bin/tpc")}
  [ -x "$tpc" ] || { echo "device-check.sh: no tpc at '$tpc' (build tp-opt, or set TPC)" >&2; exit 1; }
  rm -rf "$dir" && mkdir -p "$dir/programs"
  # The cuDNN frontend's headers (scripts/setup.sh), and cuDNN's own where
  # the CUDA toolkit here has them, for the runtime's build on the GPU
  # machine: its fused attention (runtime/src/cuda/Cudnn.h).
  for include in "$root"/.venv/lib/python3*/site-packages/include; do
    [ -f "$include/cudnn_frontend.h" ] || continue
    mkdir -p "$dir/cudnn/include"
    cp -r "$include"/cudnn_frontend* "$include"/cudnn_backend_base.h "$dir/cudnn/include/"
    cp /usr/local/cuda/include/cudnn*.h "$dir/cudnn/include/" 2>/dev/null || true
  done
  manifest="$dir/manifest.tsv"
  : >"$manifest"
  IFS=, read -ra names <<<"$models"
  for name in "${names[@]}"; do
    model=test/models/$name
    [ -f "$root/$model/ts_fold.onnx" ] || { echo "device-check.sh: no model '$name' under test/models" >&2; exit 1; }
    # f32 programs (a bf16 checkpoint would compute in bf16: those are
    # below).
    "$tpc" "$root/$model/ts_fold.onnx" --hf-config "$root/$model/config.json" \
      --dtype f32 --emit cpp -o "$dir/work/$name" >/dev/null
    cp "$dir/work/$name/model.cpp" "$dir/programs/$name.cpp"
    # name, model file, reference directory (relative to the tree's
    # root), ranks
    printf '%s\t%s\t%s\t1\n' "$name" "$model/ts_fold.onnx" "$model/ref" >>"$manifest"
  done
  # bf16 programs: the models' bf16 checkpoints (test/models/NAME_bf16,
  # computed in bf16 by default) against PyTorch's own bf16 run, on both
  # backends.
  : >"$dir/bf16.tsv"
  for name in "${names[@]}"; do
    model=test/models/${name}_bf16
    [ -f "$root/$model/ts_fold.onnx" ] || continue
    "$tpc" "$root/$model/ts_fold.onnx" --hf-config "$root/$model/config.json" \
      --emit cpp -o "$dir/work/${name}_bf16" >/dev/null
    cp "$dir/work/${name}_bf16/model.cpp" "$dir/programs/${name}_bf16.cpp"
    printf '%s\t%s\t%s\n' "${name}_bf16" "$model/ts_fold.onnx" "$model/ref" >>"$dir/bf16.tsv"
  done
  # The first model at tp=2 as well: two MPI ranks on the CPU backend, and
  # the GPU backend's refusal of two ranks on one GPU.
  name=${names[0]}_tp2
  model=test/models/${names[0]}
  "$tpc" "$root/$model/ts_fold.onnx" --hf-config "$root/$model/config.json" \
    --tp 2 --dtype f32 --emit cpp -o "$dir/work/$name" >/dev/null
  cp "$dir/work/$name/model.cpp" "$dir/programs/$name.cpp"
  printf '%s\t%s\t%s\t2\n' "$name" "$model/ts_fold.onnx" "$model/ref" >>"$manifest"
  # The training programs (tpc --train) of the models with a PyTorch
  # reference run (test/models/NAME/train).
  : >"$dir/train.tsv"
  for name in "${names[@]}"; do
    model=test/models/$name
    [ -f "$root/$model/train/reference.json" ] || continue
    # The folded export, or where folding took what training needs
    # (Gemma's 1 + w), the unfolded one.
    export=ts_fold.onnx
    "$tpc" "$root/$model/$export" --train --dtype f32 --emit cpp -o "$dir/work/${name}_train" \
      >/dev/null 2>&1 || {
      export=ts_nofold.onnx
      "$tpc" "$root/$model/$export" --train --dtype f32 --emit cpp -o "$dir/work/${name}_train" >/dev/null
    }
    cp "$dir/work/${name}_train/model.cpp" "$dir/programs/${name}_train.cpp"
    printf '%s\t%s\t%s\tf32\n' "${name}_train" "$model/$export" "$model/train" >>"$dir/train.tsv"
    # Trained in bf16 too where PyTorch's bf16 run is recorded
    # (test/models/NAME/train_bf16: model.to(bfloat16), so the program
    # updates its bf16 parameters itself, without FP32 masters).
    [ -d "$root/$model/train_bf16" ] || continue
    "$tpc" "$root/$model/$export" --train --dtype bf16 --master-weights none --emit cpp -o "$dir/work/${name}_train_bf16" >/dev/null
    cp "$dir/work/${name}_train_bf16/model.cpp" "$dir/programs/${name}_train_bf16.cpp"
    printf '%s\t%s\t%s\tbf16\n' "${name}_train_bf16" "$model/$export" "$model/train_bf16" >>"$dir/train.tsv"
  done
  if ((medium)); then
    # The graph only: the GPU machine makes the weights (PyTorch, seed 0)
    # and the program reads them from that checkpoint.
    work=$root/build/bench/forward
    [ -f "$work/model/model.onnx" ] || {
      "$root/scripts/setup.sh" --models
      "$root/.venv/bin/python" "$root/bench/forward/make_model.py" "$work/model"
    }
    "$tpc" "$work/model/model.onnx" --emit cpp -o "$dir/work/medium_llama" >/dev/null
    cp "$dir/work/medium_llama/model.cpp" "$dir/programs/medium_llama.cpp"
    "$tpc" "$work/model/model.onnx" --train --emit cpp -o "$dir/work/medium_llama_train" >/dev/null
    cp "$dir/work/medium_llama_train/model.cpp" "$dir/programs/medium_llama_train.cpp"
    # And as bf16 programs (parameters and activations bf16), against
    # PyTorch's model in bf16.
    "$tpc" "$work/model/model.onnx" --dtype bf16 --emit cpp -o "$dir/work/medium_llama_bf16" >/dev/null
    cp "$dir/work/medium_llama_bf16/model.cpp" "$dir/programs/medium_llama_bf16.cpp"
    "$tpc" "$work/model/model.onnx" --train --dtype bf16 --emit cpp -o "$dir/work/medium_llama_train_bf16" >/dev/null
    cp "$dir/work/medium_llama_train_bf16/model.cpp" "$dir/programs/medium_llama_train_bf16.cpp"
    cp "$work/model/config.json" "$dir/medium_llama_config.json"
  fi
  if [ -n "$large" ]; then
    # The graph only (meta device); the GPU machine makes the weights
    # (PyTorch, seed 0). bf16 programs, as PyTorch's model in bf16: the
    # training program updates its bf16 parameters itself.
    "$root/scripts/setup.sh" --models >/dev/null
    "$root/.venv/bin/python" "$root/bench/large/large.py" export "$dir/work/large" --shape "$large" \
      >"$dir/large-export.log" 2>&1 || {
      tail -5 "$dir/large-export.log" >&2
      echo "device-check.sh: the large model's export failed ($dir/large-export.log)" >&2
      exit 1
    }
    "$tpc" "$dir/work/large/model.onnx" --dtype bf16 --emit cpp -o "$dir/work/large_llama" >/dev/null
    cp "$dir/work/large_llama/model.cpp" "$dir/programs/large_llama.cpp"
    "$tpc" "$dir/work/large/model.onnx" --train --dtype bf16 --master-weights none \
      --emit cpp -o "$dir/work/large_llama_train" >/dev/null
    cp "$dir/work/large_llama_train/model.cpp" "$dir/programs/large_llama_train.cpp"
    cp "$dir/work/large/config.json" "$dir/large_llama_config.json"
  fi
  rm -rf "$dir/work"
  echo "device-check.sh: prepared $(ls "$dir/programs" | wc -l) programs in $dir"
  ;;
run)
  [ -f "$dir/manifest.tsv" ] || { echo "device-check.sh: '$dir' was not prepared (bench/device-check.sh prepare)" >&2; exit 1; }
  build=${build:-$dir/build}
  cuda=ON onednn=AUTO
  ((cpu_only)) && cuda=OFF onednn=OFF
  start=$(date +%s)
  cudnn=()
  [ -d "$dir/cudnn/include" ] && cudnn=(-DTPRT_CUDNN_FRONTEND_INCLUDE="$dir/cudnn/include")
  cmake -G Ninja -S "$root/runtime" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DTPRT_CUDA=$cuda -DTPRT_ONEDNN=$onednn -DTPRT_PROGRAMS="$dir/programs" \
    "${cudnn[@]}" >"$dir/build.log" 2>&1 &&
    ninja -C "$build" >>"$dir/build.log" 2>&1 || {
    tail -40 "$dir/build.log" >&2
    echo "device-check.sh: the build failed ($dir/build.log)" >&2
    exit 1
  }
  gemm=$(sed -n 's/.*tprt: CPU products on \([A-Za-z]*\).*/\1/p' "$dir/build.log" | head -1)
  attention=$(sed -n 's/.*tprt: \(cuDNN fused attention [a-z]*\).*/\1/p' "$dir/build.log" | head -1)
  echo "device-check.sh: built in $(($(date +%s) - start)) s (CUDA $cuda, CPU products on $gemm${attention:+, $attention})"
  args=(--dir "$dir" --programs "$build/programs" --root "$root" --iters "$iters")
  ((cpu_only)) && args+=(--cpu-only)
  ((torch_compile)) || args+=(--no-torch-compile)
  python=${PYTHON:-$(command -v python3)}
  [ -x "$root/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && ((cpu_only)) && python=$root/.venv/bin/python
  PYTHONUNBUFFERED=1 "$python" "$root/bench/device_check.py" "${args[@]}"
  ;;
*)
  usage
  ;;
esac
