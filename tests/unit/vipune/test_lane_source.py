"""vipune-lane's source identity: the sha256 of lane/'s manifest, build script, source list and Rust
sources, which names the vipune-lane a checkout needs (it moves with any source byte and with a
file's name, nothing else); and what the vipune-lane takes from a vipune source: the files it compiles,
the items it copies and whether the source still has the bytes each copy was made from."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vipune_eval.stages.report.sections.provenance import stale_copies
from vipune_eval.vipune import lane_source

RUST = r'''
/// doc with a } brace
pub(crate) fn get_embedding(&mut self, content: &str) -> Result<Vec<f32>, Error> {
    let s = "a { brace in a string \" still";
    let r = r#"raw } "quoted" {"#;
    let c = '{';
    // a comment }
    /* a block { comment */
    if content.is_empty() { return Ok(vec![]); }
    Ok(vec![1.0])
}

fn after() {}
'''


def test_an_item_is_cut_at_its_own_closing_brace_whatever_its_strings_and_comments_hold():
    item = lane_source.rust_item(RUST, "fn get_embedding")
    assert item.startswith("fn get_embedding(") and item.endswith("Ok(vec![1.0])\n}")
    assert "fn after" not in item
    assert lane_source.rust_item(RUST, "fn get_embed") is None  # a whole name, not a prefix
    assert lane_source.rust_item(RUST, "fn missing") is None


def lane_report(sources) -> dict:
    """The part of report.json the report names stale copies from: the vipune-lane's recorded build."""
    return {"builds": [], "provenance": {"lane": {"binary": "0.20.2-aaaaaaaaaaaa", "built": {"sources": sources}}}}


def fake_source(folder: Path) -> Path:
    """A vipune source holding every file and item lane/vipune_sources.json names."""
    listed = lane_source.listed()
    for file in listed["compiled"]:
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).write_text(f"// {file}\n")
    for copy in listed["copies"]:
        path = folder / copy["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:  # a whole file pinned: its own bytes
            out.write(f"{copy['item']}() {{ original(); }}\n" if copy.get("item") else f"// {copy['file']}\n")
    return folder


def test_a_source_that_changes_a_copied_item_is_named_and_one_that_changes_elsewhere_is_not(tmp_path):
    source = fake_source(tmp_path / "vipune")
    pinned = {(c["file"], c.get("item")): lane_source.item_sha256(source, c["file"], c.get("item"))
              for c in lane_source.listed()["copies"]}
    lane = tmp_path / "lane"
    shutil.copytree(lane_source.LANE, lane)
    listed = lane_source.listed(lane)
    for copy in listed["copies"]:
        copy["sha256"] = pinned[(copy["file"], copy.get("item"))]
    (lane / lane_source.SOURCES).write_text(json.dumps(listed))
    assert all(c["same"] for c in lane_source.vipune_sources(source, lane)["copies"])

    handlers = source / "src/commands/handlers.rs"
    handlers.write_text(handlers.read_text() + "fn handle_add() { edited(); }\n")  # outside the copied item
    assert all(c["same"] for c in lane_source.vipune_sources(source, lane)["copies"])
    handlers.write_text(handlers.read_text().replace("fn handle_search() { original(); }",
                                                     "fn handle_search() { edited(); }"))
    found = lane_source.vipune_sources(source, lane)
    changed = [c for c in found["copies"] if not c["same"]]
    assert [(c["file"], c["item"]) for c in changed] == [("src/commands/handlers.rs", "fn handle_search")]
    [sentence] = stale_copies(lane_report(found))
    assert sentence.startswith("vipune-lib copies `fn handle_search` from src/commands/handlers.rs, which this "
                               "source changes (") and sentence.endswith("its numbers do not follow that edit")

    (source / "src/main.rs").write_text("// no main any more\n")
    gone = stale_copies(lane_report(lane_source.vipune_sources(source, lane)))
    assert any("from src/main.rs, which this source no longer has" in s for s in gone)


def test_a_struct_an_enum_and_a_whole_file_are_pinned_by_their_own_bytes(tmp_path):
    """The search's path holds clap's definitions (``enum Commands``, ``struct Cli``) and files the
    vipune-lane stands in for whole (src/commands/import.rs): each is cut and hashed as it is."""
    text = "#[derive(Parser)]\nstruct Cli {\n    /// json { in a doc\n    json: bool,\n}\nenum Commands { Search { query: String } }\n"
    assert lane_source.rust_item(text, "struct Cli") == "struct Cli {\n    /// json { in a doc\n    json: bool,\n}"
    assert lane_source.rust_item(text, "enum Commands") == "enum Commands { Search { query: String } }"
    assert lane_source.item_sha256(tmp_path, "src/import.rs", None) is None  # the file is gone
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "import.rs").write_bytes(b"fn run_import() {}\n")
    assert lane_source.item_sha256(tmp_path, "src/import.rs", None) == hashlib.sha256(b"fn run_import() {}\n").hexdigest()


def test_a_copy_follows_each_release_it_lists(tmp_path):
    """An item whose bytes differ between the releases the vipune-lane is built against (the model's loading
    between 0.19.1 and 0.20.2) lists one sha256 per release: either is the same, any other is not."""
    source = fake_source(tmp_path / "vipune")
    lane = tmp_path / "lane"
    shutil.copytree(lane_source.LANE, lane)
    listed = lane_source.listed(lane)
    mine = {(c["file"], c.get("item")): lane_source.item_sha256(source, c["file"], c.get("item"))
            for c in listed["copies"]}
    for copy in listed["copies"]:
        copy["sha256"] = ["0" * 64, mine[(copy["file"], copy.get("item"))]]
    (lane / lane_source.SOURCES).write_text(json.dumps(listed))
    found = lane_source.vipune_sources(source, lane)["copies"]
    assert all(c["same"] and len(c["pinned"]) == 2 for c in found)
    listed["copies"][0]["sha256"] = ["0" * 64, "1" * 64]
    (lane / lane_source.SOURCES).write_text(json.dumps(listed))
    assert [c["same"] for c in lane_source.vipune_sources(source, lane)["copies"]][0] is False


def test_a_source_without_a_file_the_lane_compiles_cannot_build_it(tmp_path):
    source = fake_source(tmp_path / "vipune")
    (source / "src/rrf.rs").unlink()
    with pytest.raises(SystemExit, match="src/rrf.rs is missing: the vipune-lane compiles vipune's src/rrf.rs"):
        lane_source.vipune_sources(source)


def test_build_sh_reads_the_record_on_one_line(tmp_path):
    source = fake_source(tmp_path / "vipune")
    said = subprocess.run([sys.executable, str(Path(lane_source.__file__)), "--sources", str(source)],
                          capture_output=True, text=True, check=True).stdout
    assert "\n" not in said.strip() and json.loads(said) == lane_source.vipune_sources(source)


def test_a_lane_that_records_no_sources_names_no_copy():
    assert stale_copies(lane_report(None)) == [] and stale_copies({"builds": [], "provenance": {}}) == []


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
    listed = lane / lane_source.SOURCES  # a new pin is a new lane
    listed.write_text(listed.read_text().replace('"src/rrf.rs"', '"src/rrf2.rs"'))
    assert lane_source.source_sha256(lane) not in (first, edited)


def test_build_sh_reads_the_same_name_from_the_system_python():
    """build.sh runs the file alone, before anything is installed: the sha256 and the file name."""
    out = subprocess.run([sys.executable, "-I", lane_source.__file__], capture_output=True, text=True, check=True)
    sha = lane_source.source_sha256()
    assert out.stdout.split() == [sha, lane_source.lane_name(sha)]
    assert lane_source.lane_name(sha) == f"vipune-lane-{sha[:12]}"
