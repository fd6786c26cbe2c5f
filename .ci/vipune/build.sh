#!/usr/bin/env bash
# Builds the real vipune with no download but crates.io and PyPI, and prints the path of the binary.
#
# usage: .ci/vipune/build.sh [--cached] [VERSION [ONNXRUNTIME_VERSION]]
#        .ci/vipune/build.sh --checkout DIR [ONNXRUNTIME_VERSION]
#
#   VERSION    a release on crates.io (`cargo install vipune --version VERSION --locked`); by
#              default the one the harness's contract was checked against, read from
#              vipune_eval/vipune/release.py (the pin's one place).
#   --checkout a clone of randomm/vipune, built as it is now (`cargo install --path DIR --locked`),
#              e.g. to compare your change with the last release (docs/reruns.md).
#   --cached   only look: print the path of an earlier build and exit 0, or exit 3 saying why
#              there is none (the tests use this; they never start a build).
#   ONNXRUNTIME_VERSION  the ONNX Runtime the build's ort-sys was made for; by default from the
#              ort-sys version its Cargo.lock pins (rc.15 → 1.31.1, rc.9 → 1.20.1).
#
# ort-sys's build script would fetch ONNX Runtime from pyke's CDN; instead it is pointed at the
# libonnxruntime.so.<ver> inside PyPI's onnxruntime wheel (ORT_LIB_PATH, ORT_PREFER_DYNAMIC_LINK=1,
# read from ort-sys 2.0.0-rc.15's build/main.rs; ORT_LIB_LOCATION for rc.9), ORT_SKIP_DOWNLOAD=1
# makes a missing library fail at once, and an rpath lets the binary find the library without
# LD_LIBRARY_PATH. 0.19.x and older need Debian's libssl-dev and pkg-config.
#
# Results are cached in $VIPUNE_EVAL_CACHE (default ~/.cache/vipune-eval): a release under a folder
# keyed by its version and the ONNX Runtime version, reused while it runs and names its version;
# a checkout under one keyed by its folder name, rebuilt incrementally on every call. Exits
# non-zero, with the reason, when the build cannot be made.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${VIPUNE_EVAL_CACHE:-$HOME/.cache/vipune-eval}

cached_only=0
checkout=
case ${1:-} in
--cached) cached_only=1; shift ;;
--checkout)
    checkout=$(cd "${2:?--checkout needs the folder of a vipune clone}" && pwd)
    shift 2
    ;;
esac

ort_for_sys() { # the ONNX Runtime release whose C API an ort-sys version was generated from
    case $1 in
    2.0.0-rc.15) echo 1.31.1 ;;
    2.0.0-rc.9) echo 1.20.1 ;;
    esac
}
locked_ort_sys() { # the ort-sys version a Cargo.lock pins
    sed -n '/^name = "ort-sys"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$1"
}

if [ -n "$checkout" ]; then
    [ -f "$checkout/Cargo.lock" ] || { echo "build.sh: $checkout has no Cargo.lock: not a vipune clone?" >&2; exit 2; }
    version=checkout
    ort_version=${1:-$(ort_for_sys "$(locked_ort_sys "$checkout/Cargo.lock")")}
    [ -n "$ort_version" ] || { echo "build.sh: say which ONNX Runtime $checkout's ort-sys ($(locked_ort_sys "$checkout/Cargo.lock")) needs (second argument)" >&2; exit 2; }
    home=$cache/checkout-$(basename "$checkout")-ort$ort_version
else
    version=${1:-$(sed -n 's/^RELEASE = "\(.*\)"$/\1/p' "$here/../../vipune_eval/vipune/release.py")}
    case $version in
    0.20.*) default_ort=1.31.1 ;; # ort-sys 2.0.0-rc.15
    0.19.*) default_ort=1.20.1 ;; # ort-sys 2.0.0-rc.9 (ORT_API_VERSION 20)
    *) default_ort= ;;
    esac
    ort_version=${2:-$default_ort}
    [ -n "$ort_version" ] || { echo "build.sh: say which ONNX Runtime vipune $version's ort-sys needs (second argument)" >&2; exit 2; }
    home=$cache/vipune-$version-ort$ort_version
fi
bin=$home/bin/vipune

works() { # a build counts only if it runs and names its version; vipune has no --version flag,
    # and every command creates ~/.vipune and opens a database: a throwaway HOME
    # (its output is read whole: `| grep -q` may close the pipe early, and pipefail then fails)
    local home_tmp said
    [ -x "$bin" ] || return 1
    home_tmp=$(mktemp -d)
    said=$(HOME=$home_tmp "$bin" --db-path "$home_tmp/v.db" --json version 2>/dev/null || true)
    rm -rf "$home_tmp"
    if [ "$version" = checkout ]; then
        [[ $said == *'"version"'* ]]
    else
        [[ $said =~ \"version\":\ *\"$version\" ]]
    fi
}
if [ "$version" != checkout ] && works; then
    echo "$bin"
    exit 0
fi
if [ $cached_only = 1 ]; then
    if command -v cargo >/dev/null; then
        echo "vipune $version is not built in $cache: \`.ci/vipune/build.sh $version\` builds it (cargo, crates.io and PyPI; about 8 min cold on 2 cores)" >&2
    else
        echo "vipune $version is not built in $cache, and cargo is not installed here to build it (.ci/vipune/build.sh)" >&2
    fi
    exit 3
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

export ORT_LIB_PATH=$home/lib ORT_LIB_LOCATION=$home/lib ORT_PREFER_DYNAMIC_LINK=1 ORT_SKIP_DOWNLOAD=1
export RUSTFLAGS="-C link-arg=-Wl,-rpath,$home/lib"
if [ "$version" = checkout ]; then
    echo "build.sh: cargo install --path $checkout against ONNX Runtime $ort_version (PyPI wheel)" >&2
    export CARGO_TARGET_DIR=$home/target # kept: the next build of the checkout is incremental
    cargo install --path "$checkout" --locked --root "$home" --force >&2
else
    echo "build.sh: cargo install vipune $version against ONNX Runtime $ort_version (PyPI wheel); a cold build takes about 8 min on 2 cores" >&2
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
fi

if ldd "$bin" | grep -q "libonnxruntime.*not found"; then
    echo "build.sh: $bin does not find libonnxruntime:" >&2
    ldd "$bin" >&2
    exit 1
fi
works || { echo "build.sh: $bin was built but \`vipune --json version\` does not say $version" >&2; exit 1; }
[ "$version" = checkout ] || rm -rf "$cache/target-$version" "$cache/src-$version" # large; the binary and library are the cache
echo "build.sh: built vipune $version in $((SECONDS - start)) s" >&2
echo "$bin"
