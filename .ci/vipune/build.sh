#!/usr/bin/env bash
# Builds the real vipune from crates.io (`cargo install vipune --version VERSION --locked`) with
# no download but crates.io and PyPI, and prints the path of the binary.
#
# ort-sys's build script would fetch ONNX Runtime from pyke's CDN; instead it is pointed at the
# libonnxruntime.so.<ver> inside PyPI's onnxruntime wheel (ORT_LIB_PATH, ORT_PREFER_DYNAMIC_LINK=1,
# read from ort-sys 2.0.0-rc.15's build/main.rs), ORT_SKIP_DOWNLOAD=1 makes a missing library fail
# at once, and an rpath lets the binary find the library without LD_LIBRARY_PATH.
#
# The result is cached in $VIPUNE_EVAL_CACHE (default ~/.cache/vipune-eval) under a folder keyed
# by the vipune version and the ONNX Runtime version, and reused when it is already there and
# answers `--version`. Exits non-zero (with the reason) when the build cannot be made.
#
# usage: .ci/vipune/build.sh [VERSION] [ONNXRUNTIME_VERSION]
#   VERSION defaults to the release the harness pins (0.20.2); ONNXRUNTIME_VERSION to the ONNX
#   Runtime its ort-sys was made for: 1.31 for 0.20.x (ort 2.0.0-rc.15), 1.20 for 0.19.x (rc.9,
#   ORT_API_VERSION 20; needs Debian's libssl-dev and pkg-config).
set -euo pipefail
version=${1:-0.20.2}
case $version in
0.20.*) default_ort=1.31.1 ;;
0.19.*) default_ort=1.20.1 ;;
*) default_ort= ;;
esac
ort_version=${2:-$default_ort}
[ -n "$ort_version" ] || { echo "build.sh: say which ONNX Runtime vipune $version's ort-sys needs (second argument)" >&2; exit 2; }
cache=${VIPUNE_EVAL_CACHE:-$HOME/.cache/vipune-eval}
home=$cache/vipune-$version-ort$ort_version
bin=$home/bin/vipune

works() { # a cached binary counts only if it runs and names its version; vipune has no
    # --version flag and every command creates ~/.vipune and opens a database: a throwaway HOME
    local home_tmp
    home_tmp=$(mktemp -d)
    [ -x "$bin" ] && HOME=$home_tmp "$bin" --db-path "$home_tmp/v.db" --json version 2>/dev/null |
        grep -q "\"version\": *\"$version\""
    local ok=$?
    rm -rf "$home_tmp"
    return $ok
}
if works; then
    echo "$bin"
    exit 0
fi
command -v cargo >/dev/null || { echo "build.sh: cargo not found; vipune $version cannot be built" >&2; exit 1; }

mkdir -p "$home/lib" "$cache/wheels"
start=$SECONDS
lib=$home/lib/libonnxruntime.so.$ort_version
if [ ! -f "$lib" ]; then
    python3 -m pip download -q --no-deps --only-binary :all: -d "$cache/wheels" "onnxruntime==$ort_version" >&2
    wheel=$(ls "$cache"/wheels/onnxruntime-"$ort_version"-*.whl | head -n1)
    python3 - "$wheel" "$lib" <<'PY'
import shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    [name] = [n for n in z.namelist() if n.startswith("onnxruntime/capi/libonnxruntime.so.")]
    with z.open(name) as src, open(out + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.move(out + ".part", out)
PY
fi
ln -sf "libonnxruntime.so.$ort_version" "$home/lib/libonnxruntime.so"
ln -sf "libonnxruntime.so.$ort_version" "$home/lib/libonnxruntime.so.1"

echo "build.sh: cargo install vipune $version against ONNX Runtime $ort_version (PyPI wheel); a cold build takes tens of minutes on 2 cores" >&2
export ORT_LIB_PATH=$home/lib ORT_LIB_LOCATION=$home/lib ORT_PREFER_DYNAMIC_LINK=1 ORT_SKIP_DOWNLOAD=1
export RUSTFLAGS="-C link-arg=-Wl,-rpath,$home/lib"
export CARGO_TARGET_DIR=$cache/target-$version
log=$cache/cargo-install-$version.log
if ! cargo install vipune --version "$version" --locked --root "$home" --force 2>&1 | tee "$log" >&2; then
    # A registry mirror can lack a version the release's Cargo.lock pins (seen: webpki-roots
    # 1.0.11 for 0.20.2). Then build the same sources with only those crates moved to the
    # newest version the registry has, and record each move beside the binary.
    grep -q "failed to select a version for the requirement" "$log" || exit 1
    src=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "vipune-$version" | head -n1)
    [ -n "$src" ] || { echo "build.sh: vipune $version's sources are not in cargo's registry cache" >&2; exit 1; }
    work=$cache/src-$version
    rm -rf "$work" && cp -r "$src" "$work"
    : >"$home/lock-deviations.txt"
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        if (cd "$work" && cargo fetch --locked) 2>"$log"; then break; fi
        crate=$(sed -n 's/.*failed to select a version for the requirement `\([^ ]*\) = .*(locked to \([^)]*\)).*/\1 \2/p' "$log" | head -n1)
        [ -n "$crate" ] || { cat "$log" >&2; exit 1; }
        set -- $crate
        (cd "$work" && cargo update -p "$1@$2" 2>&1 | grep -E "Downgrading|Updating $1" || true) | tee -a "$home/lock-deviations.txt" >&2
    done
    echo "build.sh: the registry lacks crates vipune $version's Cargo.lock pins; built with:" >&2
    cat "$home/lock-deviations.txt" >&2
    cargo install --path "$work" --locked --root "$home" --force >&2
fi

if ldd "$bin" | grep -q "libonnxruntime.*not found"; then
    echo "build.sh: $bin does not find libonnxruntime:" >&2
    ldd "$bin" >&2
    exit 1
fi
works || { echo "build.sh: $bin was built but \`vipune --json version\` does not say $version" >&2; exit 1; }
rm -rf "$cache/target-$version" "$cache/src-$version" # large; the binary and library are the cache
echo "build.sh: built vipune $version in $((SECONDS - start)) s" >&2
echo "$bin"
