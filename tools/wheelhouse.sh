#!/usr/bin/env bash
# A wheelhouse of what the project needs beyond a GPU image that already has PyTorch and the
# scientific stack (numpy, pandas, transformers, matplotlib, seaborn, pyyaml, tqdm, filelock, ...),
# for an offline GPU host (docs/gpu-and-cluster.md, "Measured on GPU"):
#
#   bash tools/wheelhouse.sh OUT_DIR [PYTHON_VERSION]       # default 3.12, manylinux x86-64
#
# run in the project's installed environment (the versions are the ones installed there), then on
# the host, from the checkout:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site OUT_DIR/*.whl
#   export PYTHONPATH=$PWD/src:/tmp/site
#
# It takes Snakemake, datasets (the corpus shards are read with it), MLflow's client and its SQLite store (sqlalchemy, alembic), jsonschema,
# markdown, hjson and pydantic with everything they need, at the versions this environment has
# (the closure is read from the installed metadata, for Linux and PYTHON_VERSION), as wheels for
# PYTHON_VERSION; a package PyPI has only as source (connection_pool, DeepSpeed) is built into a
# wheel here. It drops the packages such an image already has (IMAGE below: a PyTorch image's
# usual set; two versions of one package would stop the install). ~31 MB for Python 3.12
# (2026-11-27).
set -euo pipefail
OUT=${1:?usage: wheelhouse.sh OUT_DIR [PYTHON_VERSION]}
PY=${2:-3.12}
cd "$(dirname "$0")/.."
# already in a PyTorch GPU image (keep theirs: they are built against its torch and numpy)
IMAGE="annotated-doc anyio attrs certifi charset-normalizer click cloudpickle filelock h11 idna
jinja2 markupsafe numpy packaging pandas pyyaml requests urllib3 zipp psutil py-cpuinfo msgpack
ninja nvidia-ml-py einops tqdm transformers tokenizers safetensors huggingface-hub tabulate wrapt
torch triton sympy networkx mpmath fsspec setuptools pyarrow xxhash hf-xet"
ROOTS="snakemake mlflow-skinny mlflow-tracing sqlalchemy alembic jsonschema hjson pydantic protobuf
typing-extensions markdown deepspeed datasets"
# name==version of ROOTS and all they need (Linux, PYTHON_VERSION), as installed here
WANT=$(python3 - "$PY" $ROOTS <<'PY'
import re, sys
from importlib import metadata
from packaging.markers import Marker
env = {"python_version": sys.argv[1], "python_full_version": sys.argv[1] + ".0",
       "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
       "platform_machine": "x86_64", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "extra": ""}
key = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
seen, todo = {}, sys.argv[2:]
while todo:
    name = todo.pop()
    if key(name) in seen:
        continue
    dist = metadata.distribution(name)
    seen[key(name)] = dist.version
    for req in dist.requires or []:
        req, _, marker = req.partition(";")
        if not marker or Marker(marker).evaluate(env):
            todo.append(re.split(r"[ <>=!~\[(]", req.strip())[0])
print("\n".join(f"{k}=={v}" for k, v in sorted(seen.items())))
PY
)
mkdir -p "$OUT"
for req in $WANT; do
  name=${req%%==*}
  [[ " $(echo $IMAGE) " == *" $name "* ]] && continue
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$OUT" "$req" \
    2>/dev/null ||
    python3 -m pip wheel -q --no-deps --no-build-isolation -w "$OUT" "$req"  # source only
done
ls "$OUT" | wc -l | xargs echo "wheels in $OUT:"
du -sh "$OUT"
