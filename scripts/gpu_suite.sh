#!/usr/bin/env bash
# Runs the GPU tests (part "tests"), the GPU benchmarks (part "bench"), what the kernel
# languages and the call path add (part "languages": the Triton tests and benchmark, the core's
# GPU tests, the hit path's cost, serving through a miss and the Python host cost) or the Python
# module's part (part "python": its GPU tests, rank groups over torch's TCPStore and 8 processes
# sharing a cold warmup; part "quick": the hit path, serving through a miss and the Python host
# cost, then part "python", for one call of a session short of GPU time) from a folder made by
# scripts/stage_gpu.sh, writing logs under OUT_DIR.
# Every step has its own time limit, so a hang in one still leaves the others' logs.
# Part "compare" times the hit path (BM_SideBySide) and the Python host cost per call
# (bench/python_host_cost.py) of this stage and of BEFORE_DIR (a stage of an earlier revision:
# bench/zerojit_bench_launch and python/zerojit), alternating, in one run.
#   scripts/gpu_suite.sh STAGE_DIR OUT_DIR tests|bench|languages|python|quick
#   scripts/gpu_suite.sh STAGE_DIR OUT_DIR compare BEFORE_DIR
set -uo pipefail
stage=$(cd "$1" && pwd)
out=$2
part=$3
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
ZEROJIT_CACHE_DIR=$(mktemp -d)  # start from an empty compile cache
export ZEROJIT_CACHE_DIR
export ZEROJIT_TOOL=$stage/tools/zerojit
step() {  # step LIMIT LOG COMMAND...
  local limit=$1 log=$2
  shift 2
  {
    echo "=== $* ($(date -u +%H:%M:%S))"
    timeout "$limit" "$@" 2>&1
    echo "=== exit $?"
  } >>"$log"
}
if [ -d "$stage/cute" ]; then  # the CuTeDSL tests' pack, references and runtime (stage_gpu.sh)
  xz -dc "$stage/cute/libcute_dsl_runtime.so.xz" >"$stage/cute/libcute_dsl_runtime.so"
  export ZEROJIT_CUTE_DSL_RUNTIME=$stage/cute/libcute_dsl_runtime.so
  export ZEROJIT_TEST_CUTE_EXPORTS=$stage/cute
fi
python_gpu_tests() {  # the Python module's GPU tests and its PyTorch integration's
  PYTHONPATH=$stage/python step 150 "$out/python.log" python3 -m unittest discover -v \
    -s "$repo/python/tests" -t "$repo/python/tests" -p 'test_gpu*.py'
  PYTHONPATH=$stage/python step 150 "$out/python.log" python3 -m unittest discover -v \
    -s "$repo/python/tests" -t "$repo/python/tests" -p 'test_cpu_torch*.py'
}
if [ "$part" = languages ]; then
  nvidia-smi -L >"$out/languages.log" 2>&1
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' \
    >>"$out/languages.log" 2>&1
  step 120 "$out/languages.log" "$stage/tests/zerojit_core_gpu_tests"
  PYTHONPATH=$stage/python step 300 "$out/languages.log" python3 -m unittest discover -v \
    -s "$repo/python/tests" -t "$repo/python/tests" -p 'lang_gpu*.py'
  PYTHONPATH=$stage/python step 240 "$out/languages.log" python3 "$repo/bench/triton_bench.py" \
    --json "$out/triton.json"
  step 60 "$out/languages.log" "$stage/bench/zerojit_bench_launch" \
    --benchmark_filter=SideBySide --benchmark_repetitions=5 --benchmark_report_aggregates_only
  step 180 "$out/languages.log" "$stage/bench/zerojit_bench_fallback"
  PYTHONPATH=$stage/python step 240 "$out/languages.log" python3 "$repo/bench/python_host_cost.py" \
    --json "$out/host_cost.json"
elif [ "$part" = tests ]; then
  nvidia-smi -L >"$out/gpu_tests.log" 2>&1
  step 120 "$out/gpu_tests.log" "$stage/tests/zerojit_core_gpu_tests"
  step 240 "$out/gpu_tests.log" "$stage/tests/zerojit_dsv4_gpu_tests"
  step 200 "$out/gpu_tests.log" "$stage/tests/zerojit_cli_gpu_tests"
  step 60 "$out/tool.log" "$ZEROJIT_TOOL" warmup
  step 90 "$out/tool.log" "$ZEROJIT_TOOL" run --steps 2000 --monitor error
  step 90 "$out/tool.log" "$ZEROJIT_TOOL" run --model dsv4-pro --steps 2000 --monitor error
  step 60 "$out/tool.log" "$ZEROJIT_TOOL" run --steps 300 --testing-warmup-max-tokens 256 --monitor error
  if [ -d "$stage/python/zerojit" ]; then
    python_gpu_tests
    PYTHONPATH=$stage/python step 300 "$out/languages.log" python3 -m unittest discover -v \
      -s "$repo/python/tests" -t "$repo/python/tests" -p 'lang_gpu*.py'
  fi
elif [ "$part" = python ] || [ "$part" = quick ]; then
  nvidia-smi -L >"$out/python.log" 2>&1
  if [ "$part" = quick ]; then  # the figures a change of the call path moves, first
    step 60 "$out/languages.log" "$stage/bench/zerojit_bench_launch" \
      --benchmark_filter=SideBySide --benchmark_repetitions=5 --benchmark_report_aggregates_only
    step 180 "$out/languages.log" "$stage/bench/zerojit_bench_fallback"
    PYTHONPATH=$stage/python step 240 "$out/languages.log" python3 \
      "$repo/bench/python_host_cost.py" --json "$out/host_cost.json"
  fi
  python_gpu_tests
  # Groups of 8 ranks over torch's TCPStore (torch is here), then 8 ranks against 1 sharing a
  # cold warmup on the host's cores (docs/BENCHMARKS.md, section 18).
  PYTHONPATH=$stage/python step 300 "$out/ranks.log" python3 -m unittest discover -v \
    -s "$repo/python/tests" -t "$repo/python/tests" -p 'test_cpu_ranks.py'
  SEPARATE_SESSIONS=1 step 300 "$out/shared_warmup.log" bash "$repo/bench/shared_warmup.sh" \
    "$stage" 8 3 union
elif [ "$part" = compare ]; then
  before=$(cd "$4" && pwd)
  for round in 1 2; do
    for side in before after; do
      dir=$stage
      if [ "$side" = before ]; then dir=$before; fi
      step 60 "$out/compare.log" "$dir/bench/zerojit_bench_launch" --benchmark_filter=SideBySide \
        --benchmark_repetitions=5 --benchmark_report_aggregates_only
      PYTHONPATH=$dir/python step 240 "$out/compare.log" python3 "$repo/bench/python_host_cost.py" \
        --json "$out/host_cost_${side}_$round.json"
    done
  done
else
  step 60 "$out/bench.log" "$stage/bench/zerojit_bench_launch" --benchmark_repetitions=10 \
    --benchmark_report_aggregates_only
  step 60 "$out/bench.log" "$stage/bench/zerojit_bench_dispatch" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only
  step 240 "$out/bench.log" "$stage/bench/warmup_sweep.sh" "$stage" "$(nproc)"
  step 240 "$out/bench.log" "$stage/bench/zerojit_bench_kernels" --json "$out/bandwidth_zerojit.json"
  step 120 "$out/bench.log" python3 "$repo/bench/torch_composite.py" --json "$out/bandwidth_torch.json"
  PYTHONPATH=$stage/python step 300 "$out/bench.log" python3 "$repo/bench/triton_bench.py" \
    --json "$out/triton.json"
fi
