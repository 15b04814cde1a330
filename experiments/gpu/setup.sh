# Sourced by each experiments/gpu/round*.sh on the lent GPU machine (no network):
# the log under $OUT, the packages the image lacks from the wheels in .whl/
# (docs/experiments.md says how to bring them), offline Hugging Face, versions.
set -uo pipefail
OUT=${OUT:-runs/gpu-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
export TQDM_MININTERVAL=30
python3 -c "import torch, transformers, trl, datasets, peft, PIL, pyarrow; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'pyarrow', pyarrow.__version__, 'pillow', PIL.__version__, torch.cuda.get_device_name())" || exit 1
python3 -c "import rosetrain.cli, rosetrain.train.data, rosetrain.evaluation.evaluate" || exit 1  # every package rosetrain imports
nproc; echo "start: $(date +%T)"
