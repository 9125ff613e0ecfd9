#!/usr/bin/env bash
# The model library's GPU checks as one prepared run, for a machine with a CUDA GPU (the device tool's H200):
#   run(command="bash scripts/gpu_check.sh", timeout_s=600)
# It needs python3 with torch, numpy, scipy, safetensors and pytest, and installs nothing: the repository root goes on
# PYTHONPATH (prism/ imports neither Optuna nor Ray). Logs go to $OUT (the device tool's folder) or ./gpu-check.
# Each step has its own time limit, so a slow one still leaves the others' results; the limits add up to 580 s,
# inside one 600-s call. Paste the two bench tables, with their command lines, into docs/benchmarks.md.
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -c 'import torch; assert torch.cuda.is_available(), "no CUDA GPU here"' || exit 1
{ nvidia-smi; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'; } \
    2>&1 | tee "$out/env.txt"

# 1. bf16, TF32, fused AdamW, learning on CUDA; flash/efficient SDPA (math fallback disabled) for head dims 32..256.
#    The pyproject's warning filters name Optuna, which this machine may lack: override them.
timeout 110 python3 -m pytest -q -p no:cacheprovider -o addopts= -o filterwarnings= tests/prism/test_cuda.py 2>&1 \
    | tee "$out/test_cuda.log"

# 2. GPT-2 small shape (12 x 768, T=1024), eager, bf16 autocast: every default schedule vs uniform 12 heads of 64.
gpt2=(--d-model 768 --n-layer 12 --block-size 1024 --batch-size 16 --dh-max 256)
timeout 200 python3 scripts/bench_throughput.py "${gpt2[@]}" --steps 10 --warmup 5 --rounds 9 --kernel 2>&1 \
    | tee "$out/bench_eager.log"

# 3. The same with torch.compile, on the uniform model, a progressive ramp and the narrowest extreme (compiling
#    takes most of this step's time; no memory probes, which would compile every model again).
timeout 270 python3 scripts/bench_throughput.py "${gpt2[@]}" --compile --no-memory --steps 10 --warmup 5 --rounds 7 \
    --schedules '12x12;3x3,6x3,12x3,24x3;24x12' 2>&1 | tee "$out/bench_compile.log"
