# Set up the lent GPU machine (no registry access): wheels carried in .whl, KernelBench in .kb.
# Usage: source experiments/benchmarks/gpu_env.sh   (not through a pipe: its exports must reach the calling shell)
# The device's copy of the checkout holds the working tree, but its git HEAD may be an older commit (the session's
# start): run the tree as copied (not `git archive HEAD`), and set EVOFORGE_COMMIT for the results' meta files.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 || \
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site . || return 1
export EVOFORGE_KERNELBENCH=$PWD/.kb PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, triton, optuna, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'optuna', optuna.__version__, 'ray', ray.__version__)"
