"""vipune-lane's source identity: the sha256 of lane/'s manifest and Rust sources, which names the
vipune-lane a checkout needs; it moves with any source byte and with a file's name, nothing else."""

import shutil
import subprocess
import sys

from vipune_eval.vipune import lane_source


def test_the_name_follows_every_source_byte_and_name(tmp_path):
    lane = tmp_path / "lane"
    shutil.copytree(lane_source.LANE, lane)
    first = lane_source.source_sha256(lane)
    assert first == lane_source.source_sha256()  # a copy is the same sources
    (lane / "README.txt").write_text("not a source")
    assert lane_source.source_sha256(lane) == first
    main = lane / "src" / "main.rs"
    main.write_bytes(main.read_bytes() + b"\n")
    edited = lane_source.source_sha256(lane)
    assert edited != first
    main.rename(lane / "src" / "lane.rs")
    assert lane_source.source_sha256(lane) not in (first, edited)


def test_build_sh_reads_the_same_name_from_the_system_python():
    """build.sh runs the file alone, before anything is installed: the sha256 and the file name."""
    out = subprocess.run([sys.executable, "-I", lane_source.__file__], capture_output=True, text=True, check=True)
    sha = lane_source.source_sha256()
    assert out.stdout.split() == [sha, lane_source.lane_name(sha)]
    assert lane_source.lane_name(sha) == f"vipune-lane-{sha[:12]}"
