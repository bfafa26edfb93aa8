#!/usr/bin/env bash
# A wheelhouse of what the project needs beyond a GPU image that already has PyTorch and the
# scientific stack (numpy, pandas, transformers, matplotlib, seaborn, pyyaml, tqdm, filelock, ...),
# for an offline GPU host (docs/gpu-and-cluster.md, "Measured on GPU"):
#
#   bash tools/wheelhouse.sh OUT_DIR [PYTHON_VERSION]       # default 3.12, manylinux x86-64
#
# then on the host, from the checkout:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site OUT_DIR/*.whl
#   export PYTHONPATH=$PWD/src:/tmp/site
#
# It downloads MLflow's client, its SQLite store (sqlalchemy, alembic), jsonschema, markdown and
# their dependencies, and builds DeepSpeed's wheel (PyPI has only its source), then drops the
# wheels of packages such an image already has (IMAGE below: a PyTorch image's usual set; two
# versions of one package would stop the install). ~24 MB for Python 3.12 (2026-11-26).
set -euo pipefail
OUT=${1:?usage: wheelhouse.sh OUT_DIR [PYTHON_VERSION]}
PY=${2:-3.12}
cd "$(dirname "$0")/.."
pin() { grep -o "\"$1==[^\"]*\"" pyproject.toml | tr -d '"'; }  # the project's exact pin
ALL=$(mktemp -d)
python3 -m pip download -q --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$ALL" \
  "$(pin mlflow | sed 's/mlflow/mlflow-skinny/')" "$(pin mlflow | sed 's/mlflow/mlflow-tracing/')" \
  sqlalchemy alembic "$(pin jsonschema)" hjson pydantic "$(pin protobuf)" typing_extensions \
  $(pin markdown)
python3 -m pip wheel -q --no-deps --no-build-isolation -w "$ALL" "$(pin deepspeed)"
# already in a PyTorch GPU image (keep theirs: they are built against its torch and numpy)
IMAGE="annotated-doc anyio attrs certifi charset-normalizer click cloudpickle filelock h11 idna
jinja2 markupsafe numpy packaging pandas pyyaml requests urllib3 zipp psutil py-cpuinfo msgpack
ninja nvidia-ml-py einops tqdm transformers tokenizers safetensors huggingface-hub"
mkdir -p "$OUT"
for w in "$ALL"/*.whl; do
  name=$(basename "$w" | cut -d- -f1 | tr 'A-Z_' 'a-z-')
  [[ " $(echo $IMAGE) " == *" $name "* ]] || cp "$w" "$OUT/"
done
rm -rf "$ALL"
ls "$OUT" | wc -l | xargs echo "wheels in $OUT:"
du -sh "$OUT"
