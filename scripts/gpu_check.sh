#!/usr/bin/env bash
# The first minutes on a CUDA GPU, prepared as one run (the device tool: run(command="bash scripts/gpu_check.sh",
# timeout_s=600)). Each step runs under its own time limit and logs to $OUT/STEP.log (default ./gpu-check), so a slow
# one leaves the others' results; $OUT/summary.txt has one line per step. The limits add up to 590 s. No network.
#
# Without a CUDA GPU it is a dry run: each step either runs a CPU stand-in of itself (said so in its log) or says
# why it cannot. Needs python3 with torch, numpy, scipy, safetensors and pytest; the trial-memory and study steps also
# need the service's packages (optuna, ray, ...) and are skipped, saying so, where they are missing.
# The tables of the speed steps go to docs/benchmarks.md with their command lines the day a GPU is lent.
set -uo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
: >"$out/summary.txt"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
if $py -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then gpu=1; else gpu=0; fi
if $py -c 'import optuna, ray, sqlalchemy' 2>/dev/null; then service=1; else service=0; fi

step() { # step NAME SECONDS COMMAND...: run it under its limit into $out/NAME.log, say how it ended
    local name=$1 limit=$2 started=$SECONDS rc
    shift 2
    echo "== $name (limit ${limit} s): $*"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    tail -n 20 "$out/$name.log"
    case $rc in
        0) outcome="ok" ;;
        124) outcome="TIMED OUT" ;;
        *) outcome="exit $rc" ;;
    esac
    echo "$name: $outcome after $((SECONDS - started)) s" | tee -a "$out/summary.txt"
}
skip() { echo "$1: skipped: $2" | tee -a "$out/summary.txt"; }

[ $gpu = 1 ] || echo "no CUDA GPU here: dry run (CPU stand-ins, or the reason a step cannot run)" | tee -a "$out/summary.txt"

# 1. the device and torch facts, with what precision="auto" picks and the peak the recipe divides by
step facts 30 bash -c "{ nvidia-smi || echo 'nvidia-smi: not found (no NVIDIA driver)'; } && $py - <<'EOF'
import sys, torch
sys.path.insert(0, 'scripts')
from gpu_recipe import peak_tflops
from prism.training import autocast_dtype
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
if torch.cuda.is_available():
    name, cap = torch.cuda.get_device_name(), torch.cuda.get_device_capability()
    print('device', name, 'capability', cap, 'memory', torch.cuda.get_device_properties(0).total_memory / 2**30, 'GiB')
    print('precision auto ->', autocast_dtype('auto', cap), '; peak', peak_tflops(name), 'TFLOPS (table)')
else:
    print('no CUDA device: precision auto -> fp32 on the CPU')
EOF"

# 2. attention kernels, bf16/TF32/fused AdamW and learning on CUDA (skipped, each saying so, without one)
step cuda_tests 100 $py -m pytest -q -rs -p no:cacheprovider -o addopts= -o filterwarnings= tests/prism/test_cuda.py

# 3. compile across 6 schedules in one process: graphs shared per head count, no recompile-limit warning
if [ $gpu = 1 ]; then
    step compile 100 $py scripts/gpu_steps.py compile --steps 20
else # inductor on 2 CPU cores would take the whole run: Dynamo's eager backend traces and guards the same way
    step compile 100 env PRISM_COMPILE_BACKEND=eager $py scripts/gpu_steps.py compile --steps 4
fi

# 4. tokens/s, MFU and peak memory at the 124 M shape (uniform 12 heads and the paper ramp), compiled and eager
if [ $gpu = 1 ]; then
    step speed_compiled 130 $py scripts/gpu_recipe.py studies/gpu-124m.toml --measure --compile --steps 10 --warmup 5
    step speed_eager 70 $py scripts/gpu_recipe.py studies/gpu-124m.toml --measure --no-compile --steps 10 --warmup 5
else
    skip speed_124m "the 124 M shape needs a CUDA GPU; the script itself is checked at studies/tiny.toml on the CPU"
    step speed_dry 70 $py scripts/gpu_recipe.py studies/tiny.toml --measure --device cpu --peak-tflops 1 --steps 2 --warmup 1
fi

# 5. one trial's memory over its life, probes included, through the worker session
if [ $service = 1 ]; then
    step trial_memory 60 $py scripts/gpu_steps.py trial-memory --steps 20
else
    skip trial_memory "the service's packages (optuna, ray) are not installed in $py"
fi

# 6. a 2-worker study at gpus_per_trial = 0.5 through the product: SQLite, a local Ray, no cluster
if [ $service = 1 ]; then
    sed -e 's/^workers = 2$/workers = 2\ngpus_per_trial = 0.5/' -e 's/^n_trials = 5$/n_trials = 4/' studies/tiny.toml >"$out/shared-gpu.toml"
    # without a GPU, the product's own one-line refusal is the reason this step cannot run
    step study 100 $py -m search.cli run "$out/shared-gpu.toml" --storage "sqlite:///$out/shared-gpu.db"
else
    skip study "the service's packages (optuna, ray) are not installed in $py"
fi
echo "== summary"
cat "$out/summary.txt"
