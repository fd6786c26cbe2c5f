#!/usr/bin/env bash
# The Rust guards on lane/ (vipune-lane), as CI and pre-commit run them:
#   rustfmt --check on lane/'s own files (cargo fmt's check, without resolving the crate: the
#   vipune files the lane includes are vipune's, formatted by vipune), and
#   cargo clippy -D warnings against the vipune source build.sh builds the release from.
# Usage: .ci/vipune/lint_lane.sh [--fmt-only] [VERSION]   (VERSION: vipune's release, default the pin)
# The release is built first where it is not (build.sh VERSION: its sources and ONNX Runtime). Clippy's
# own artifacts go to target-clippy-ort<version> in the cache, apart from the builds' target folders.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fmt_only=0
[ "${1:-}" = --fmt-only ] && { fmt_only=1; shift; }
python=$(python3 -c 'import sys; print(sys.executable)')

rustfmt --check --edition 2024 "$repo/lane/build.rs" "$repo/lane/src/main.rs" # main.rs's `mod`s: arms.rs, copies.rs
[ $fmt_only = 1 ] && exit 0

version=${1:-$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); from vipune_eval.vipune.release import RELEASE; print(RELEASE)' "$repo")}
cache=${VIPUNE_EVAL_CACHE:-$HOME/.cache/vipune-eval}
bin=$("$here/build.sh" "$version") # found, or built (its sources and ONNX Runtime are what clippy compiles against)
home=$(dirname "$(dirname "$bin")")
ort_version=${home##*-ort}
ort_dir=$cache/onnxruntime-$ort_version
src=$cache/src-$version
[ -f "$src/Cargo.lock" ] && [ -d "$ort_dir" ] || { echo "lint_lane.sh: $src or $ort_dir missing after build.sh $version" >&2; exit 1; }

# lane/ in a workspace of its own, with the release's lock (as build.sh builds it)
work=$cache/lint-lane-src
"$python" "$here/sync_tree.py" "$repo/lane" "$work" --exclude Cargo.lock --exclude target >/dev/null
cmp -s "$src/Cargo.lock" "$work/Cargo.lock" || cp "$src/Cargo.lock" "$work/Cargo.lock"

export ORT_LIB_PATH=$ort_dir ORT_LIB_LOCATION=$ort_dir ORT_PREFER_DYNAMIC_LINK=1 ORT_SKIP_DOWNLOAD=1
export CARGO_TARGET_DIR=$cache/target-clippy-ort$ort_version
export VIPUNE_LANE_VIPUNE_SRC=$src VIPUNE_LANE_SOURCE_TOOL=$repo/vipune_eval/vipune/lane_source.py VIPUNE_LANE_PYTHON=$python
cargo clippy --manifest-path "$work/Cargo.toml" --config "patch.crates-io.vipune.path = \"$src\"" \
    -- -D warnings # the binary and its build script (lane/ has no tests: --all-targets would compile vipune's own, which need its dev-dependencies)
