#!/usr/bin/env bash
# Builds the real vipune, and beside it the harness's vipune-lane from the same vipune source,
# with no download but crates.io and PyPI; prints the path of the vipune binary.
#
# usage: .ci/vipune/build.sh [--cached] [VERSION [ONNXRUNTIME_VERSION]]
#        .ci/vipune/build.sh --checkout DIR [--fast] [ONNXRUNTIME_VERSION]
#
#   VERSION    a release on crates.io (`cargo install vipune --version VERSION --locked`); by
#              default the one the harness's contract was checked against, read from
#              vipune_eval/vipune/release.py (the pin's one place).
#   --checkout a clone of randomm/vipune, built as it is now, e.g. to compare your change with
#              the last release (docs/reruns.md). It is built from a copy (your tree is never
#              written to: no target/, no Cargo.lock change), incrementally on every call.
#   --fast     (with --checkout) the maintainer's loop: vipune's release profile without its fat
#              LTO and single codegen unit (profile "fast": no LTO, 16 codegen units, incremental;
#              the binary built in vipune-lane's workspace, so vipune's library is compiled once
#              for both), a one-line edit rebuilt in seconds, not minutes. The code and the
#              floating-point arithmetic are the same (no fast-math in Rust), so it ranks as the
#              release profile does (tests/unit/vipune/test_lane.py checks every list and score);
#              its binary and lane say "profile": "fast" and every report names a fast build.
#   --cached   only look: print the path of an earlier build and exit 0, or exit 3 saying why
#              there is none (the tests use this; they never start a build).
#   --source VERSION  print the folder of that release's own sources, as crates.io ships them
#              (cargo's registry copy, fetched when absent): what CI copies as a checkout whose
#              Cargo.lock pins a crate the registry lacks (issue 38).
#   ONNXRUNTIME_VERSION  the ONNX Runtime the build's ort-sys was made for; by default from the
#              ort-sys version its Cargo.lock pins (rc.15 → 1.31.1, rc.9 → 1.20.1).
#
# vipune-lane: lane/ (a Rust command linking the `vipune` library crate; docs/vipune-contract.md)
# built against the very source and Cargo.lock the binary was built from, named after its own
# sources' sha256 (vipune_eval/vipune/lane_source.py): bin/vipune-lane-<sha12> beside bin/vipune.
# It compiles vipune's private search files from that source (lane/vipune_sources.json, "compiled",
# included by path by lane/build.rs) and records the sha256 of each vipune item it still copies
# against the one it was copied from ("copies"), the binary's sha256 (so the workflow pairs the
# two) and its profile. A release's lane is reused while it runs and names that binary; a
# checkout's is rebuilt (incrementally) with it.
#
# ort-sys's build script would fetch ONNX Runtime from pyke's CDN; instead it is pointed at the
# libonnxruntime.so.<ver> inside PyPI's onnxruntime wheel (ORT_LIB_PATH, ORT_PREFER_DYNAMIC_LINK=1,
# read from ort-sys 2.0.0-rc.15's build/main.rs; ORT_LIB_LOCATION for rc.9), ORT_SKIP_DOWNLOAD=1
# makes a missing library fail at once, and an rpath lets the binary find the library without
# LD_LIBRARY_PATH. 0.19.x and older need Debian's libssl-dev and pkg-config.
#
# A registry mirror can lack a version a Cargo.lock pins (seen: webpki-roots 1.0.11 for 0.20.2).
# Then the same sources are built with only those crates moved to the newest version the
# registry has, in a copy, and each move is recorded in lock-deviations.txt beside bin/ (the
# report names it in the build's row).
#
# Results are cached in $VIPUNE_EVAL_CACHE (default ~/.cache/vipune-eval): a release under a folder
# keyed by its version and the ONNX Runtime version, a checkout under one keyed by its folder
# name; cargo's target folder is kept per ONNX Runtime version (target-ort<ver>), shared by every
# build against it, so a checkout and a lane reuse the release's compiled dependencies. Exits
# non-zero, with the reason, when the build cannot be made.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${VIPUNE_EVAL_CACHE:-$HOME/.cache/vipune-eval}

registry_source() { # $1: a release; prints cargo's registry copy of its sources, fetched when absent
    local found fetcher
    found=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "vipune-$1" 2>/dev/null | head -n1)
    if [ -z "$found" ]; then
        fetcher=$cache/fetch-$1
        mkdir -p "$fetcher/src" && echo 'fn main() {}' >"$fetcher/src/main.rs"
        printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nvipune = "=%s"\n' "$1" >"$fetcher/Cargo.toml"
        (cd "$fetcher" && cargo fetch -q) >&2
        found=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "vipune-$1" | head -n1)
        [ -n "$found" ] || { echo "build.sh: vipune $1's sources are not in cargo's registry cache" >&2; return 1; }
    fi
    echo "$found"
}

cached_only=0
checkout=
profile=release
case ${1:-} in
--source)
    registry_source "${2:?--source needs a release}"
    exit
    ;;
--cached) cached_only=1; shift ;;
--checkout)
    checkout=$(cd "${2:?--checkout needs the folder of a vipune clone}" && pwd)
    shift 2
    if [ "${1:-}" = --fast ]; then
        profile=fast
        shift
    fi
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
    [ $profile = release ] || home=$home-$profile
else
    version=${1:-$(sed -n 's/^RELEASE = "\(.*\)"$/\1/p' "$repo/vipune_eval/vipune/release.py")}
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
read -r lane_sha lane_name <<<"$(python3 "$repo/vipune_eval/vipune/lane_source.py")"
[ -n "$lane_name" ] || { echo "build.sh: cannot name vipune-lane (python3 $repo/vipune_eval/vipune/lane_source.py)" >&2; exit 1; }
lane=$home/bin/$lane_name

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
lane_works() { # the lane runs and says it was built beside these very binary bytes
    [ -x "$lane" ] || return 1
    local said
    said=$("$lane" version 2>/dev/null || true)
    [[ $said == *"\"binary_sha256\":\"$(sha256sum "$bin" | cut -d' ' -f1)\""* ]]
}
if [ "$version" != checkout ] && works && lane_works; then
    echo "$bin"
    exit 0
fi
if [ $cached_only = 1 ]; then
    if works; then # the binary without this checkout's lane: the lane's tests say so
        echo "build.sh: vipune $version is built, but not its lane $lane_name (\`.ci/vipune/build.sh $version\` builds it)" >&2
        echo "$bin"
        exit 0
    fi
    if command -v cargo >/dev/null; then
        echo "vipune $version is not built in $cache: \`.ci/vipune/build.sh $version\` builds it (cargo, crates.io and PyPI; about 4 min cold on 2 idle cores)" >&2
    else
        echo "vipune $version is not built in $cache, and cargo is not installed here to build it (.ci/vipune/build.sh)" >&2
    fi
    exit 3
fi
command -v cargo >/dev/null || { echo "build.sh: cargo not found; vipune $version cannot be built" >&2; exit 1; }

mkdir -p "$home/bin" "$cache/wheels"
start=$SECONDS
ort_dir=$cache/onnxruntime-$ort_version # one library per ONNX Runtime release, shared by its builds
lib=$ort_dir/libonnxruntime.so.$ort_version
if [ ! -f "$lib" ]; then
    mkdir -p "$ort_dir"
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
ln -sf "libonnxruntime.so.$ort_version" "$ort_dir/libonnxruntime.so"
ln -sf "libonnxruntime.so.$ort_version" "$ort_dir/libonnxruntime.so.1"

# The same flags for every build against this ONNX Runtime: cargo reuses its compiled crates.
export ORT_LIB_PATH=$ort_dir ORT_LIB_LOCATION=$ort_dir ORT_PREFER_DYNAMIC_LINK=1 ORT_SKIP_DOWNLOAD=1
export RUSTFLAGS="-C link-arg=-Wl,-rpath,$ort_dir"
export CARGO_TARGET_DIR=$cache/target-ort$ort_version
# The fast profile (--fast): vipune's release profile without LTO, 16 codegen units compiled
# incrementally; the same opt-level, so the same code and arithmetic. (Cargo's default "thin local"
# LTO, lto = false, undoes most of incremental: a one-line edit took 45 s of codegen with it, 5 s without.)
profile_flags=(--profile "$profile" --config 'profile.fast.inherits="release"' --config 'profile.fast.lto="off"'
    --config 'profile.fast.codegen-units=16' --config 'profile.fast.incremental=true')
deviations=$home/lock-deviations.txt

work=$home/lane-src # vipune-lane's workspace: a copy of lane/ with the source's Cargo.lock,
workspace_made=0      # made afresh once per call (the build writes a Cargo.lock); modification times kept
lane_workspace() {
    [ $workspace_made = 1 ] && return
    rm -rf "$work" && cp -rp "$repo/lane" "$work" && cp -p "$src/Cargo.lock" "$work/Cargo.lock"
    workspace_made=1
}

relock() { # $1: a copy of a vipune source; moves each crate its Cargo.lock pins that the registry
    # lacks to the newest version the registry has, recording each move in $deviations
    local work=$1 log=$cache/relock.log crate
    : >"$deviations"
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        if (cd "$work" && cargo fetch --locked) 2>"$log"; then
            echo "build.sh: the registry lacks crates this Cargo.lock pins; built with:" >&2
            cat "$deviations" >&2
            return 0
        fi
        crate=$(sed -n 's/.*failed to select a version for the requirement `\([^ ]*\) = .*(locked to \([^)]*\)).*/\1 \2/p' "$log" | head -n1)
        [ -n "$crate" ] || { cat "$log" >&2; return 1; }
        set -- $crate
        (cd "$work" && cargo update -p "$1@$2" 2>&1 | grep -E "Downgrading|Updating $1" || true) | tee -a "$deviations" >&2
    done
    cat "$log" >&2
    return 1
}

fetchable() { # $1: a vipune source whose Cargo.lock the registry can honour, relocked if need be;
    # the moves are kept beside it too ($1.lock-deviations.txt), so a later build from the same
    # relocked copy (the binary deleted, another home) still records them
    if ! (cd "$1" && cargo fetch --locked) 2>"$cache/fetch.log"; then
        grep -q "failed to select a version for the requirement" "$cache/fetch.log" || { cat "$cache/fetch.log" >&2; return 1; }
        relock "$1" && cp "$deviations" "$1.lock-deviations.txt"
    elif [ -f "$1.lock-deviations.txt" ]; then
        cp "$1.lock-deviations.txt" "$deviations"
    fi
}

if [ "$version" = checkout ]; then
    # A copy (modification times kept, so cargo rebuilds only what changed since the last call)
    src=$home/src
    rm -rf "$src" "$src.lock-deviations.txt" && mkdir -p "$src"
    tar -C "$checkout" --exclude=./target --exclude=./.git -cf - . | tar -C "$src" -xf -
    vipune_version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$src/Cargo.toml" | head -n1)
    described=$(git -C "$checkout" describe --always --dirty 2>/dev/null || echo "not a git tree")
    vipune_source="checkout $checkout ($described)"
    rm -f "$deviations"
    fetchable "$src"
    if [ $profile = fast ]; then
        # In vipune-lane's workspace, so that vipune's library is compiled once for both.
        echo "build.sh: building vipune from $checkout (a copy) in vipune-lane's workspace, profile fast, against ONNX Runtime $ort_version (PyPI wheel)" >&2
        lane_workspace
        cargo build --manifest-path "$work/Cargo.toml" "${profile_flags[@]}" \
            --config "patch.crates-io.vipune.path = \"$src\"" -p vipune --bin vipune >&2
        mkdir -p "$home/bin" && cp "$CARGO_TARGET_DIR/fast/vipune" "$bin.part" && mv "$bin.part" "$bin"
    else
        echo "build.sh: cargo install --path $checkout (a copy) against ONNX Runtime $ort_version (PyPI wheel)" >&2
        cargo install --path "$src" --locked --root "$home" --force >&2
    fi
else
    vipune_version=$version
    vipune_source="vipune $version from crates.io"
    if ! works; then
        echo "build.sh: cargo install vipune $version against ONNX Runtime $ort_version (PyPI wheel); a cold build takes about 8 min on 2 cores" >&2
        log=$cache/cargo-install-$version.log
        rm -f "$deviations"
        if ! cargo install vipune --version "$version" --locked --root "$home" --force 2>&1 | tee "$log" >&2; then
            grep -q "failed to select a version for the requirement" "$log" || exit 1
        fi
    fi
    # vipune-lane needs the source itself: a copy of cargo's registry copy, relocked where need be.
    src=$cache/src-$version
    if [ ! -f "$src/Cargo.toml" ]; then
        registry=$(registry_source "$version")
        rm -rf "$src.part" "$src.lock-deviations.txt" && cp -rp "$registry" "$src.part" && mv "$src.part" "$src"
    fi
    fetchable "$src"
    works || cargo install --path "$src" --locked --root "$home" --force >&2 # the release's own lock could not be honoured
fi

if ldd "$bin" | grep -q "libonnxruntime.*not found"; then
    echo "build.sh: $bin does not find libonnxruntime:" >&2
    ldd "$bin" >&2
    exit 1
fi
works || { echo "build.sh: $bin was built but \`vipune --json version\` does not say $version" >&2; exit 1; }
if [ $profile = release ]; then # read by vipune_eval/vipune/binary.py's build_profile
    rm -f "$home/build-profile.txt"
else
    echo "$profile" >"$home/build-profile.txt"
fi
if [ -f "$deviations" ]; then # in the words of vipune_eval/vipune/binary.py's lock_deviations
    moved=$(sed -nE 's/.*(Downgrading|Updating|Upgrading) ([^ ]+) v([^ ]+) -> v([^ ]+).*/\2 \3 → \4/p' "$deviations" | awk '!seen[$0]++' | paste -sd, - | sed 's/,/, /g')
    vipune_source="$vipune_source, built with its Cargo.lock moved where the registry lacks a pin ($moved)"
fi

# vipune-lane: lane/ against the same source and lock ($src), beside the binary it records.
if [ "$version" = checkout ] || ! lane_works; then
    echo "build.sh: building $lane_name against $vipune_source" >&2
    lane_workspace
    sources=$(python3 "$repo/vipune_eval/vipune/lane_source.py" --sources "$src")
    VIPUNE_LANE_VIPUNE_VERSION=$vipune_version VIPUNE_LANE_VIPUNE_SOURCE=$vipune_source \
        VIPUNE_LANE_SOURCE_ID=$lane_sha VIPUNE_LANE_BINARY_SHA256=$(sha256sum "$bin" | cut -d' ' -f1) \
        VIPUNE_LANE_VIPUNE_SRC=$src VIPUNE_LANE_SOURCES=$sources VIPUNE_LANE_PROFILE=$profile \
        cargo build --manifest-path "$work/Cargo.toml" "${profile_flags[@]}" \
        --config "patch.crates-io.vipune.path = \"$src\"" >&2
    cp "$CARGO_TARGET_DIR/$profile/vipune-lane" "$lane.part" && mv "$lane.part" "$lane"
    lane_works || { echo "build.sh: $lane was built but does not name $bin's sha256 (\`$lane version\`)" >&2; exit 1; }
fi
echo "build.sh: vipune $version and its lane ready in $((SECONDS - start)) s" >&2
echo "$bin"
