# Sourced by each experiments/gpu/round*.sh on the lent GPU machine (no network):
# the log under $OUT, the packages the image lacks from the wheels in .whl/
# (experiments/README.md says how to bring them), offline Hugging Face, versions.
# The device tool refuses a working tree over 64 MiB, and the committed models
# alone are about 150 MB: `bash experiments/gpu/travel.sh out KEEP...` first.
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

# send_back FOLDER NAME: the last checkpoint of the run FOLDER/NAME into $OUT as
# 15 MB tar parts (the tool's file limit), with the run's recipe record and
# ownership marker, so the trainer on the CPU resumes it (untar into FOLDER)
send_back() {
  local last
  last=$(ls -d "$1/$2"/checkpoint-[0-9]* 2>/dev/null | sort -V | tail -1)
  [ -n "$last" ] && tar -C "$1" -cf - "$2/$(basename "$last")" "$2/rosetrain_recipe.yaml" "$2/.rosetrain.json" \
    | split -b 15M - "$OUT/$2-$(basename "$last").tar."
}
