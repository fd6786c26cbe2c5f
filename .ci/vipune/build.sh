#!/usr/bin/env bash
# Builds the real vipune, and beside it the harness's vipune-lane from the same vipune source,
# with no download but crates.io and PyPI; prints the path of the vipune binary.
#
# usage: .ci/vipune/build.sh [--cached] [VERSION [ONNXRUNTIME_VERSION]]
#        .ci/vipune/build.sh --checkout DIR [--fast] [--lane-only] [ONNXRUNTIME_VERSION]
#        .ci/vipune/build.sh --source VERSION
#
#   VERSION    a release on crates.io (`cargo install vipune --version VERSION --locked`); by
#              default the one the harness's contract was checked against, read from
#              vipune_eval/vipune/release.py (the pin's one place).
#   --checkout a clone of randomm/vipune, built as it is now, e.g. to compare your change with
#              the last release (docs/reruns.md). It is built from a copy (your tree is never
#              written to: no target/, no Cargo.lock change), incrementally on every call; a
#              compile error names your file, not the copy's.
#   --fast     (with --checkout) the maintainer's loop: vipune's release profile without its fat
#              LTO and single codegen unit (profile "fast": no LTO, 16 codegen units, incremental;
#              the binary built in vipune-lane's workspace, so vipune's library is compiled once
#              for both), a one-line edit rebuilt in seconds, not minutes. The code and the
#              floating-point arithmetic are the same (no fast-math in Rust), so it ranks as the
#              release profile does (tests/unit/vipune/test_vipune_lane.py checks every list and score);
#              its binary and lane say "profile": "fast" and every report names a fast build.
#   --lane-only (with --checkout) the lib lane's loop, which runs no vipune binary: only vipune-lane
#              is built (the binary is neither compiled nor linked), and its path is printed; set
#              vipune.binary to it (the workflow then refuses the binary's retrievers, which need a
#              binary). Its build.json and `vipune-lane version` name no binary.
#   --cached   only look: print the path of an earlier build and exit 0, or exit 3 saying why
#              there is none (the tests use this; they never start a build).
#   --source VERSION  print the folder of that release's own sources, as crates.io ships them
#              (cargo's registry copy, fetched when absent): what CI copies as a checkout whose
#              Cargo.lock pins a crate the registry lacks (issue 38).
#   ONNXRUNTIME_VERSION  the ONNX Runtime the build's ort-sys was made for; by default from the
#              ort-sys version its Cargo.lock pins (rc.15 → 1.31.1, rc.9 → 1.20.1).
# Any other option is refused before anything is created.
#
# vipune-lane: lane/ (a Rust command linking the `vipune` library crate; docs/vipune-contract.md)
# built against the very source and Cargo.lock the binary was built from, named after its own
# sources' sha256 (vipune_eval/vipune/lane_source.py): bin/vipune-lane-<sha12> beside bin/vipune.
# It compiles vipune's private search files from that source (lane/vipune_sources.json, "compiled",
# included by path by lane/build.rs), which records as cargo compiles them the sha256 of each of
# those files, of each vipune item the vipune-lane still copies (against the one it was copied from) and
# of the whole source (`vipune_source_sha256`); and it names the binary's sha256 and its profile.
# The binary's build records the sha256 of the source it was built from in build.json beside
# bin/: build.sh refuses a lane whose source is not the binary's, and so does the workflow
# (vipune_eval/vipune/vipune_lane.py). A release's lane is reused while it runs and names that binary;
# a checkout's is rebuilt (incrementally) with it. Where the vipune-lane does not build (an edit added a
# module the search files use, or moved one of them), nothing is replaced and the error says
# which file lane/vipune_sources.json must list.
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
# keyed by its version and the ONNX Runtime version; a checkout under one keyed by its full path
# (checkout-<folder name>-<sha12 of the resolved path>-ort<ver>[-fast]: two clones both named
# `vipune` are two builds), whose copy of the sources (src/) is synced by content
# (.ci/vipune/sync_tree.py: a file whose bytes changed gets a fresh modification time, the others
# keep theirs), because cargo decides what to recompile by modification times and the tree's own
# times say nothing about what was compiled before (crates.io's files are dated 2006). Each build
# is made in a new folder builds/<time>-<pid>/ (bin/, build.json, records), and bin/ is then
# switched to it in one rename: a build that fails leaves the previous binary and lane as they
# were, and runs planned on an earlier build keep its files (the last 3 builds are kept). Builds
# of one checkout (or one release) wait for each other (flock on its folder); cargo's target
# folder is kept per ONNX Runtime version (target-ort<ver>), shared by every build against it, so
# a checkout and a lane reuse the release's compiled dependencies (builds against it take turns).
# Exits non-zero, with the reason, when the build cannot be made. Linux only (flock, ldd).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${VIPUNE_EVAL_CACHE:-$HOME/.cache/vipune-eval}

refuse() { # $1: why; the usage follows; nothing has been created
    echo "build.sh: $1" >&2
    sed -n '5,7s/^#//p' "$0" >&2
    exit 2
}

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

# Every argument is read and checked before anything is created.
cached_only=0
checkout=
profile=release
lane_only=0
source_of=
positional=()
while [ $# -gt 0 ]; do
    case $1 in
    --source) [ $# -ge 2 ] || refuse "--source needs a release"; source_of=$2; shift 2 ;;
    --cached) cached_only=1; shift ;;
    --checkout) [ $# -ge 2 ] || refuse "--checkout needs the folder of a vipune clone"; checkout=$2; shift 2 ;;
    --fast) profile=fast; shift ;;
    --lane-only) lane_only=1; shift ;;
    -*) refuse "unknown option $1" ;;
    *) positional+=("$1"); shift ;;
    esac
done
version_like='^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$'
if [ -n "$source_of" ]; then
    [ $cached_only = 0 ] && [ -z "$checkout" ] && [ $profile = release ] && [ $lane_only = 0 ] && [ ${#positional[@]} = 0 ] ||
        refuse "--source takes a release and nothing else"
    [[ $source_of =~ $version_like ]] || refuse "--source $source_of: not a release version"
    registry_source "$source_of"
    exit
fi
[ $profile = release ] || [ -n "$checkout" ] || refuse "--fast is an option of --checkout DIR"
[ $lane_only = 0 ] || [ -n "$checkout" ] || refuse "--lane-only is an option of --checkout DIR"
[ $cached_only = 0 ] || [ -z "$checkout" ] || refuse "--cached looks for a release's build, not a checkout's"
if [ -n "$checkout" ]; then
    [ ${#positional[@]} -le 1 ] || refuse "--checkout DIR takes one more argument at most (ONNXRUNTIME_VERSION), not: ${positional[*]}"
    ort_given=${positional[0]:-}
else
    [ ${#positional[@]} -le 2 ] || refuse "too many arguments: ${positional[*]}"
    version=${positional[0]:-$(sed -n 's/^RELEASE = "\(.*\)"$/\1/p' "$repo/vipune_eval/vipune/release.py")}
    [[ $version =~ $version_like ]] || refuse "$version: not a release version"
    ort_given=${positional[1]:-}
fi
[ -z "$ort_given" ] || [[ $ort_given =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || refuse "$ort_given: not an ONNX Runtime version (like 1.31.1)"

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
    given=$checkout
    checkout=$(cd "$given" 2>/dev/null && pwd -P) || refuse "--checkout $given: no such folder"
    [ -f "$checkout/Cargo.lock" ] || { echo "build.sh: $checkout has no Cargo.lock: not a vipune clone?" >&2; exit 2; }
    version=checkout
    ort_version=${ort_given:-$(ort_for_sys "$(locked_ort_sys "$checkout/Cargo.lock")")}
    [ -n "$ort_version" ] || { echo "build.sh: say which ONNX Runtime $checkout's ort-sys ($(locked_ort_sys "$checkout/Cargo.lock")) needs (second argument)" >&2; exit 2; }
    # keyed by the full path (two clones both named `vipune` are two builds), named for people by the folder
    home=$cache/checkout-$(basename "$checkout")-$(printf '%s' "$checkout" | sha256sum | cut -c1-12)-ort$ort_version
    [ $profile = release ] || home=$home-$profile
    lock=$home/.lock
else
    case $version in
    0.20.*) default_ort=1.31.1 ;; # ort-sys 2.0.0-rc.15
    0.19.*) default_ort=1.20.1 ;; # ort-sys 2.0.0-rc.9 (ORT_API_VERSION 20)
    *) default_ort= ;;
    esac
    ort_version=${ort_given:-$default_ort}
    [ -n "$ort_version" ] || { echo "build.sh: say which ONNX Runtime vipune $version's ort-sys needs (second argument)" >&2; exit 2; }
    home=$cache/vipune-$version-ort$ort_version
    lock=$cache/src-$version.lock # its sources (src-VERSION) are shared by its builds against every ONNX Runtime
fi
bin=$home/bin/vipune
read -r lane_sha lane_name <<<"$(python3 "$repo/vipune_eval/vipune/lane_source.py")"
[ -n "$lane_name" ] || { echo "build.sh: cannot name vipune-lane (python3 $repo/vipune_eval/vipune/lane_source.py)" >&2; exit 1; }

works() { # $1: a binary; it counts only if it runs and names its version; vipune has no --version
    # flag, and every command creates ~/.vipune and opens a database: a throwaway HOME
    # (its output is read whole: `| grep -q` may close the pipe early, and pipefail then fails)
    local home_tmp said
    [ -x "$1" ] || return 1
    home_tmp=$(mktemp -d)
    said=$(HOME=$home_tmp "$1" --db-path "$home_tmp/v.db" --json version 2>/dev/null || true)
    rm -rf "$home_tmp"
    if [ "$version" = checkout ]; then
        [[ $said == *'"version"'* ]]
    else
        [[ $said =~ \"version\":\ *\"$version\" ]]
    fi
}
recorded() { # $1: a key of the build.json beside $2's bin/ folder; prints its value
    local record
    record=$(cd -P "$(dirname "$2")" 2>/dev/null && cd .. && pwd)/build.json # bin/ may be a link to builds/…/bin
    [ -f "$record" ] && sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" "$record" | head -n1
}
lane_works() { # $1: a lane, $2: its binary. The vipune-lane runs, was built beside these very binary bytes
    # (--lane-only: beside none, $2 being the vipune-lane itself), and compiled the source the build.json names
    [ -x "$1" ] || return 1
    local said digest binary_said
    said=$("$1" version 2>/dev/null || true)
    digest=$(recorded vipune_source_sha256 "$2" || true)
    if [ "$1" = "$2" ]; then binary_said='"binary_sha256":null'; else binary_said="\"binary_sha256\":\"$(sha256sum "$2" | cut -d' ' -f1)\""; fi
    [[ $said == *"$binary_said"* ]] && [ -n "$digest" ] && [[ $said == *"\"vipune_source_sha256\":\"$digest\""* ]]
}
if [ "$version" != checkout ] && works "$bin" && lane_works "$home/bin/$lane_name" "$bin"; then
    echo "$bin"
    exit 0
fi
if [ $cached_only = 1 ]; then
    if works "$bin"; then # the binary without this checkout's lane: the vipune-lane's tests say so
        echo "build.sh: vipune $version is built, but not its vipune-lane $lane_name (\`.ci/vipune/build.sh $version\` builds it)" >&2
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
command -v flock >/dev/null || { echo "build.sh: flock not found (util-linux): builds of one source must not overlap" >&2; exit 1; }

take_lock() { # $1: a file descriptor, $2: the lock file, $3: what the wait is for
    if ! flock -n "$1"; then
        echo "build.sh: waiting for $3 ($2)" >&2
        flock "$1"
    fi
}
mkdir -p "$home" "$cache/wheels"
exec 9>"$lock"
take_lock 9 "$lock" "another build of ${checkout:-vipune $version} to finish"
if [ "$version" != checkout ] && works "$bin" && lane_works "$home/bin/$lane_name" "$bin"; then
    echo "$bin" # built meanwhile by the build this one waited for
    exit 0
fi
start=$SECONDS
# The interpreter python3 runs, named once: a version manager's python3 is a shell script (pyenv's
# shim took 0.17 s a call, five calls and the vipune-lane's build script per build of the loop)
python=$(python3 -c 'import sys; print(sys.executable)')
export VIPUNE_LANE_PYTHON=$python # lane/build.rs runs vipune_eval/vipune/lane_source.py with it
ort_dir=$cache/onnxruntime-$ort_version # one library per ONNX Runtime release, shared by its builds
lib=$ort_dir/libonnxruntime.so.$ort_version
mkdir -p "$ort_dir"
exec 7>"$ort_dir.lock"
take_lock 7 "$ort_dir.lock" "another build unpacking ONNX Runtime $ort_version"
if [ ! -f "$lib" ]; then
    "$python" -m pip download -q --no-deps --only-binary :all: -d "$cache/wheels" "onnxruntime==$ort_version" >&2
    wheel=$(ls "$cache"/wheels/onnxruntime-"$ort_version"-*.whl | head -n1)
    "$python" - "$wheel" "$lib" <<'PY'
import shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    [name] = [n for n in z.namelist() if n.startswith("onnxruntime/capi/libonnxruntime.so.")]
    with z.open(name) as src, open(out + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.move(out + ".part", out)
PY
fi
ln -sfn "libonnxruntime.so.$ort_version" "$ort_dir/libonnxruntime.so"
ln -sfn "libonnxruntime.so.$ort_version" "$ort_dir/libonnxruntime.so.1"
exec 7>&-

# The same flags for every build against this ONNX Runtime: cargo reuses its compiled crates.
export ORT_LIB_PATH=$ort_dir ORT_LIB_LOCATION=$ort_dir ORT_PREFER_DYNAMIC_LINK=1 ORT_SKIP_DOWNLOAD=1
export RUSTFLAGS="-C link-arg=-Wl,-rpath,$ort_dir"
export CARGO_TARGET_DIR=$cache/target-ort$ort_version
# The fast profile (--fast): vipune's release profile without LTO, 16 codegen units compiled
# incrementally; the same opt-level, so the same code and arithmetic. (Cargo's default "thin local"
# LTO, lto = false, undoes most of incremental: a one-line edit took 45 s of codegen with it, 5 s without.)
# vipune itself and the vipune-lane, recompiled on every edit, in 256 codegen units (an edit re-optimises
# less: a one-line edit of src/rrf.rs compiled the lane-only build in 2.5-3.5 s instead of 5-5.5 s,
# 1.7 s of CPU instead of 4.1 on 2 busy cores); their dependencies, compiled once, in 16.
lane_package=vipune-lane-$(printf '%s' "$home" | sha256sum | cut -c1-12) # named after this build's folder (lane_workspace)
profile_flags=(--profile "$profile" --config 'profile.fast.inherits="release"' --config 'profile.fast.lto="off"'
    --config 'profile.fast.codegen-units=16' --config 'profile.fast.incremental=true'
    --config 'profile.fast.package.vipune.codegen-units=256' --config "profile.fast.package.$lane_package.codegen-units=256")

# This build is made in a folder of its own; bin/ is switched to it once binary and lane are built
# and checked (below), and the folder is removed where anything fails: the previous pair stays.
mkdir -p "$home/builds"
stage=$home/builds/$(date -u +%Y%m%dT%H%M%SZ)-$$
mkdir -p "$stage/bin"
trap 'rm -rf "$stage"' EXIT
deviations=$stage/lock-deviations.txt
logs=$home/logs
mkdir -p "$logs"

shown_paths() { # cargo's output with the build's copy of a checkout named as the checkout itself
    # (the copy is where cargo compiles; your file is where you fix it)
    if [ "$version" != checkout ]; then
        cat
        return
    fi
    local from to
    from=$(printf '%s' "$src" | sed 's/[][\.*^$/]/\\&/g')
    to=$(printf '%s' "$checkout" | sed 's/[\&/]/\\&/g')
    sed -u -e "s/$from/$to/g"
}

relock() { # $1: a copy of a vipune source; moves each crate its Cargo.lock pins that the registry
    # lacks to the newest version the registry has, recording each move in $deviations
    local work=$1 log=$logs/relock.log crate
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
    # relocked copy still records them. A manifest and lock fetched before are not fetched again
    # ($1.fetched: their sha256; a third of a second per build of the maintainer's loop).
    local fetched
    fetched=$(cat "$1/Cargo.toml" "$1/Cargo.lock" | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$1.fetched" 2>/dev/null)" = "$fetched" ]; then
        :
    elif ! (cd "$1" && cargo fetch --locked) 2>"$logs/fetch.log"; then
        grep -q "failed to select a version for the requirement" "$logs/fetch.log" || { cat "$logs/fetch.log" >&2; return 1; }
        relock "$1" && cp "$deviations" "$1.lock-deviations.txt"
        return
    else
        echo "$fetched" >"$1.fetched"
    fi
    [ ! -f "$1.lock-deviations.txt" ] || cp "$1.lock-deviations.txt" "$deviations"
}

# vipune-lane's workspace, where the binary is built too: lane/ synced by content, with the
# source's Cargo.lock, and its package named after this build's folder. cargo names what it
# compiles for a workspace's own package after its path *within* the workspace, so every
# workspace holding lane/ would share one name, one fingerprint and one OUT_DIR in the shared
# target folder, and a build could run another checkout's compiled build script (seen). vipune
# itself, patched in from $src outside the workspace, is named after its full path.
work=$home/lane-src
workspace_made=0
lane_workspace() {
    [ $workspace_made = 1 ] && return
    "$python" "$here/sync_tree.py" "$repo/lane" "$work" --exclude Cargo.lock --exclude Cargo.toml --exclude target >/dev/null
    sed '0,/^name = "vipune-lane"$/s//name = "'"$lane_package"'"/' \
        "$repo/lane/Cargo.toml" >"$work/Cargo.toml.part"
    grep -q '^name = "vipune-lane-' "$work/Cargo.toml.part" || { echo "build.sh: $repo/lane/Cargo.toml names no package vipune-lane" >&2; exit 1; }
    if cmp -s "$work/Cargo.toml.part" "$work/Cargo.toml"; then rm "$work/Cargo.toml.part"; else mv "$work/Cargo.toml.part" "$work/Cargo.toml"; fi
    cmp -s "$src/Cargo.lock" "$work/Cargo.lock" || cp "$src/Cargo.lock" "$work/Cargo.lock"
    workspace_made=1
}

cargo_built() { # $1: what (for the messages), $2: a log, then cargo's arguments (its output shown with your paths)
    local what=$1 log=$2
    shift 2
    cargo "$@" 2>&1 | shown_paths | tee "$log" >&2 ||
        { echo "build.sh: $what did not build (cargo's messages above, and in $log); nothing was replaced: $home/bin is the previous build" >&2; return 1; }
}

# Builds against one ONNX Runtime share cargo's target folder, and its final artifacts
# ($CARGO_TARGET_DIR/<profile>/vipune, …/vipune-lane) are one file for every source: each build
# compiles and copies them out while holding this lock.
exec 8>"$CARGO_TARGET_DIR.lock"

if [ "$version" = checkout ]; then
    src=$home/src
    mkdir -p "$src"
    # The checkout's Cargo.lock, unless it is the one relocked last time (then the relocked copy is kept)
    keep_lock=()
    if [ -f "$home/relocked-from.lock" ] && [ -f "$src/Cargo.lock" ] && cmp -s "$checkout/Cargo.lock" "$home/relocked-from.lock"; then
        keep_lock=(--exclude Cargo.lock)
    else
        rm -f "$src.lock-deviations.txt" "$home/relocked-from.lock"
    fi
    synced=$("$python" "$here/sync_tree.py" "$checkout" "$src" --exclude target --exclude .git "${keep_lock[@]}")
    echo "build.sh: $checkout → $src: $synced" >&2
    vipune_version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$src/Cargo.toml" | head -n1)
    described=$(git -C "$checkout" describe --always --dirty 2>/dev/null || echo "not a git tree")
    vipune_source="checkout $checkout ($described)"
    fetchable "$src"
    cp "$checkout/Cargo.lock" "$home/relocked-from.lock"
    # The files the vipune-lane compiles must be there before the binary is built (a moved one is named)
    [ $lane_only = 1 ] || "$python" "$repo/vipune_eval/vipune/lane_source.py" --sources "$src" 2>&1 >/dev/null | shown_paths >&2 || exit 1
    take_lock 8 "$CARGO_TARGET_DIR.lock" "another build against ONNX Runtime $ort_version (cargo's target folder)"
    # In vipune-lane's workspace (its release profile is vipune's own), so that vipune's library is
    # compiled once for both, and is named after its copy's full path (`cargo install --path` would
    # name it after no path at all: the same for every checkout).
    lane_workspace
    if [ $lane_only = 0 ]; then
        echo "build.sh: building vipune from $checkout (a copy) in vipune-lane's workspace, profile $profile, against ONNX Runtime $ort_version (PyPI wheel)" >&2
        cargo_built "vipune ($checkout)" "$logs/binary.log" build --manifest-path "$work/Cargo.toml" "${profile_flags[@]}" \
            --config "patch.crates-io.vipune.path = \"$src\"" -p vipune --bin vipune
        cp "$CARGO_TARGET_DIR/$profile/vipune" "$stage/bin/vipune"
    fi
else
    vipune_version=$version
    vipune_source="vipune $version from crates.io"
    # vipune-lane needs the source itself: a copy of cargo's registry copy (once: a release's bytes
    # never change), relocked where need be.
    src=$cache/src-$version
    if [ ! -f "$src/Cargo.toml" ]; then
        registry=$(registry_source "$version")
        rm -rf "$src.part" "$src.lock-deviations.txt" && cp -rp "$registry" "$src.part" && mv "$src.part" "$src"
    fi
    take_lock 8 "$CARGO_TARGET_DIR.lock" "another build against ONNX Runtime $ort_version (cargo's target folder)"
    if works "$bin"; then # the release's binary: its bytes are kept, only its vipune-lane is built
        cp -p "$bin" "$stage/bin/vipune"
    else
        echo "build.sh: cargo install vipune $version against ONNX Runtime $ort_version (PyPI wheel); a cold build takes about 8 min on 2 cores" >&2
        log=$cache/cargo-install-$version.log
        if ! cargo install vipune --version "$version" --locked --root "$stage" --force 2>&1 | tee "$log" >&2; then
            grep -q "failed to select a version for the requirement" "$log" || exit 1
        fi
    fi
    fetchable "$src"
    if ! works "$stage/bin/vipune"; then # the release's own lock could not be honoured: its relocked copy
        lane_workspace
        cargo_built "vipune $version (relocked)" "$logs/binary.log" build --manifest-path "$work/Cargo.toml" \
            "${profile_flags[@]}" --config "patch.crates-io.vipune.path = \"$src\"" -p vipune --bin vipune
        cp "$CARGO_TARGET_DIR/release/vipune" "$stage/bin/vipune"
    fi
fi
staged=$stage/bin/vipune
binary_sha= # --lane-only: no binary
if [ $lane_only = 0 ]; then
    if ldd "$staged" | grep -q "libonnxruntime.*not found"; then
        echo "build.sh: $staged does not find libonnxruntime:" >&2
        ldd "$staged" >&2
        exit 1
    fi
    works "$staged" || { echo "build.sh: $staged was built but \`vipune --json version\` does not say $version" >&2; exit 1; }
    binary_sha=$(sha256sum "$staged" | cut -d' ' -f1)
fi
[ $profile = release ] || echo "$profile" >"$stage/build-profile.txt" # read by vipune_eval/vipune/binary.py's build_profile
if [ -f "$deviations" ]; then # in the words of vipune_eval/vipune/binary.py's lock_deviations
    moved=$(sed -nE 's/.*(Downgrading|Updating|Upgrading) ([^ ]+) v([^ ]+) -> v([^ ]+).*/\2 \3 → \4/p' "$deviations" | awk '!seen[$0]++' | paste -sd, - | sed 's/,/, /g')
    vipune_source="$vipune_source, built with its Cargo.lock moved where the registry lacks a pin ($moved)"
fi
source_sha=$("$python" "$repo/vipune_eval/vipune/lane_source.py" --library "$src")
"$python" - "$stage/build.json" "$binary_sha" "$source_sha" "$vipune_source" "$profile" <<'PY'
import json, sys
out, binary, source, words, profile = sys.argv[1:]
with open(out, "w", encoding="utf-8") as f:  # read by vipune_eval/vipune/vipune_lane.py (the pair's check)
    json.dump({"binary_sha256": binary or None, "vipune_source_sha256": source, "vipune_source": words, "profile": profile}, f, indent=1)
PY

# vipune-lane: lane/ against the same source and lock ($src), beside the binary it records (none: --lane-only).
echo "build.sh: building $lane_name against $vipune_source" >&2
lane_workspace
if ! VIPUNE_LANE_VIPUNE_VERSION=$vipune_version VIPUNE_LANE_VIPUNE_SOURCE=$vipune_source \
    VIPUNE_LANE_SOURCE_ID=$lane_sha VIPUNE_LANE_BINARY_SHA256=$binary_sha \
    VIPUNE_LANE_VIPUNE_SRC=$src VIPUNE_LANE_SOURCE_TOOL=$repo/vipune_eval/vipune/lane_source.py VIPUNE_LANE_PROFILE=$profile \
    cargo_built "$lane_name" "$logs/lane.log" build --manifest-path "$work/Cargo.toml" "${profile_flags[@]}" \
    --config "patch.crates-io.vipune.path = \"$src\""; then
    # What the vipune-lane compiles from vipune is a list (lane/vipune_sources.json); a module those files
    # use that the list lacks is named, with where it is in the checkout.
    missing=$(sed -n -e 's/.*unresolved import `crate::\([A-Za-z_0-9]*\).*/\1/p' \
        -e 's/.*could not find `\([A-Za-z_0-9]*\)` in the crate root.*/\1/p' \
        -e 's/.*failed to resolve: .*`crate::\([A-Za-z_0-9]*\)`.*/\1/p' "$logs/lane.log" | sort -u)
    for module in $missing; do
        for file in "src/$module.rs" "src/$module/mod.rs"; do
            [ -f "$src/$file" ] && echo "build.sh: the vipune-lane compiles only the vipune files lane/vipune_sources.json lists under \"compiled\", and they use crate::$module, which it does not list: add \"$file\" there ($repo/lane/vipune_sources.json; ${checkout:-$src}/$file) and build again" >&2
        done
    done
    exit 1
fi
cp "$CARGO_TARGET_DIR/$profile/vipune-lane" "$stage/bin/$lane_name"
exec 8>&-
[ $lane_only = 0 ] || staged=$stage/bin/$lane_name # what the vipune-lane was built beside: nothing
lane_works "$stage/bin/$lane_name" "$staged" || {
    echo "build.sh: $stage/bin/$lane_name was built but does not name $staged's sha256 (or none, --lane-only) and source ($source_sha) (\`$stage/bin/$lane_name version\`): cargo reused code compiled from other bytes; nothing was replaced" >&2
    exit 1
}
[ $lane_only = 0 ] || bin=$home/bin/$lane_name # what this build prints

current=$(cd -P "$home/bin" 2>/dev/null && pwd || true)
if [ -n "$current" ] && { [ $lane_only = 1 ] || cmp -s "$current/vipune" "$staged"; }; then
    if cmp -s "$current/$lane_name" "$stage/bin/$lane_name" && cmp -s "$current/../build.json" "$stage/build.json"; then
        echo "build.sh: vipune $version and its vipune-lane unchanged, checked in $((SECONDS - start)) s" >&2
        echo "$bin" # nothing new: the build in use stays
        exit 0
    fi
    # The other lanes beside this very binary (other harness checkouts' lane/ sources) stay with it.
    [ $lane_only = 1 ] || for other in "$current"/vipune-lane-*; do
        [ -e "$other" ] && [ ! -e "$stage/bin/$(basename "$other")" ] && cp -p "$other" "$stage/bin/"
    done
fi
if [ -d "$home/bin" ] && [ ! -L "$home/bin" ]; then # a build of an earlier build.sh: kept as the oldest
    legacy=$home/builds/00000000T000000Z-legacy
    mkdir -p "$legacy"
    mv "$home/bin" "$legacy/bin"
    for record in lock-deviations.txt build-profile.txt; do
        [ -f "$home/$record" ] && mv "$home/$record" "$legacy/"
    done
fi
ln -sfn "builds/$(basename "$stage")/bin" "$home/bin.new"
mv -T "$home/bin.new" "$home/bin" # one rename: the binary and its vipune-lane change together
trap - EXIT
# The last 3 builds stay (runs planned on an earlier one still find its files).
ls -1 "$home/builds" | sort | head -n -3 | while read -r old; do rm -rf "${home:?}/builds/$old"; done
echo "build.sh: vipune $version and its vipune-lane ready in $((SECONDS - start)) s" >&2
echo "$bin"
