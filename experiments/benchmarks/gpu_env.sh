# Set up the lent GPU machine (no registry access): wheels carried in .whl, KernelBench in .kb.
# Usage: source experiments/benchmarks/gpu_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 || \
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site . || return 1
export EVOFORGE_KERNELBENCH=$PWD/.kb PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, triton, optuna, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'optuna', optuna.__version__, 'ray', ray.__version__)"
