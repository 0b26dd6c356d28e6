#!/usr/bin/env bash
# setup.sh [EXTRAS] — prepares a fresh Debian/Ubuntu machine for lik:
#   Debian packages: a C compiler, CMake, pkg-config, libcjson-dev (the `lik`
#   command reads safetensors headers with cJSON), libsqlite3-dev (its `search
#   --where` reads the index's metadata database), python3-venv;
#   a virtual environment in .venv holding the lik package (library, Python
#   front and the `lik` command), with the optional extras named in $1
#   (e.g. "test,torch").
# The CUDA backend is built by scripts/cuda_args.sh's rule: where a GPU is
# visible, for its architecture, or as LIK_CUDA / LIK_CUDA_ARCHITECTURES ask;
# ccache is used where installed.  CMAKE_ARGS (the caller's) come after the
# rule's arguments, so they win.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for pkg in build-essential cmake pkg-config libcjson-dev libsqlite3-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

source scripts/cuda_args.sh
mapfile -t rule < <(lik_cmake_args)
export CMAKE_ARGS="${rule[*]}${CMAKE_ARGS:+ $CMAKE_ARGS}"
echo "setup: building lik with CMAKE_ARGS=$CMAKE_ARGS"

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
spec="."
[ -n "${1:-}" ] && spec=".[$1]"
.venv/bin/python -m pip install -q "$spec"
