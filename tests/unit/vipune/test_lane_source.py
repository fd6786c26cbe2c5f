"""vipune-lane's source identity: the sha256 of lane/'s manifest, build script, source list and Rust
sources, which names the vipune-lane a checkout needs (it moves with any source byte and with a
file's name, nothing else); and what the vipune-lane takes from a vipune source: the files it compiles,
the items it copies and whether the source still has the bytes each copy was made from."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vipune_eval.stages.report.sections.provenance import stale_copies
from vipune_eval.vipune import lane_source

RUST = r"""
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
"""


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
    pinned = {
        (c["file"], c.get("item")): lane_source.item_sha256(source, c["file"], c.get("item"))
        for c in lane_source.listed()["copies"]
    }
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
    handlers.write_text(
        handlers.read_text().replace("fn handle_search() { original(); }", "fn handle_search() { edited(); }")
    )
    found = lane_source.vipune_sources(source, lane)
    changed = [c for c in found["copies"] if not c["same"]]
    assert [(c["file"], c["item"]) for c in changed] == [("src/commands/handlers.rs", "fn handle_search")]
    [sentence] = stale_copies(lane_report(found))
    assert sentence.startswith(
        "vipune-lib copies `fn handle_search` from src/commands/handlers.rs, which this source changes ("
    ) and sentence.endswith("its numbers do not follow that edit")

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
    assert (
        lane_source.item_sha256(tmp_path, "src/import.rs", None) == hashlib.sha256(b"fn run_import() {}\n").hexdigest()
    )


def test_a_copy_follows_each_release_it_lists(tmp_path):
    """An item whose bytes differ between the releases the vipune-lane is built against (the model's loading
    between 0.19.1 and 0.20.2) lists one sha256 per release: either is the same, any other is not."""
    source = fake_source(tmp_path / "vipune")
    lane = tmp_path / "lane"
    shutil.copytree(lane_source.LANE, lane)
    listed = lane_source.listed(lane)
    mine = {
        (c["file"], c.get("item")): lane_source.item_sha256(source, c["file"], c.get("item")) for c in listed["copies"]
    }
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
    said = subprocess.run(
        [sys.executable, str(Path(lane_source.__file__)), "--sources", str(source)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
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


# ---------------------------------------------------------------- what can write a seeded database (issue 54)


def seeding_tree(folder: Path) -> tuple[Path, Path]:
    """(a vipune source, a lane whose seeding list holds it): a search-only file, two seeding
    files pinned to their bytes, another file of the library, the manifest and lock, and files
    cargo never builds the library from."""
    files = {
        "src/lib.rs": "mod rrf;\nmod sqlite;\n",
        "src/rrf.rs": "pub struct RrfConfig { pub k: f64 }\nimpl Default for RrfConfig {\n"
        "    fn default() -> Self { Self { k: 25.0 } }\n}\n",
        "src/sqlite/mod.rs": "fn create_schema() { \"tokenize='porter unicode61'\"; }\n",
        "src/sqlite/import.rs": "fn insert_with_id() {}\n",
        "src/commands/mod.rs": "fn execute() {}\n",
        "Cargo.toml": '[package]\nname = "vipune"\n',
        "Cargo.lock": "version = 4\n",
        "README.md": "# vipune\n",
        "tests/lib_integration.rs": "#[test] fn t() {}\n",
        "docs/search.md": "x\n",
    }
    source = folder / "vipune"
    for name, text in files.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    lane = folder / "lane"
    lane.mkdir()
    pinned = [
        {"file": f, "why": "seeding", "sha256": [hashlib.sha256((source / f).read_bytes()).hexdigest()]}
        for f in ("src/sqlite/mod.rs", "src/sqlite/import.rs")
    ]
    (lane / lane_source.SOURCES).write_text(
        json.dumps(
            {
                "compiled": [],
                "copies": [],
                "seeding": {
                    "what": "",
                    "seeding_files": pinned,
                    "search_only": [{"file": "src/rrf.rs", "why": "the fusion"}],
                },
            }
        )
    )
    return source, lane


@pytest.mark.parametrize(
    "file, edit, reseeds",
    [
        ("src/rrf.rs", lambda t: t.replace("25.0", "60.0"), False),  # a search-only file: its body
        ("src/rrf.rs", lambda t: "// a comment\n" + t, False),
        (
            "src/rrf.rs",
            lambda t: t + "impl Drop for Database {\n    fn drop(&mut self) {}\n}\n",
            True,
        ),  # could run while seeding
        ("src/sqlite/mod.rs", lambda t: t.replace("porter unicode61", "unicode61"), True),  # the FTS5 schema
        ("src/sqlite/import.rs", lambda t: t.replace("{}", "{ let _ = 1; }"), True),  # the insert
        ("src/commands/mod.rs", lambda t: t + "// a comment\n", True),  # any other file of the library
        ("src/new_module.rs", lambda t: "pub fn added() {}\n", True),
        ("Cargo.lock", lambda t: t + '[[package]]\nname = "uuid"\nversion = "1.26.1"\n', True),
        ("Cargo.toml", lambda t: t + "[features]\n", True),
        ("README.md", lambda t: t + "more\n", False),  # never compiled
        ("tests/lib_integration.rs", lambda t: t + "// more\n", False),
        ("docs/search.md", lambda t: t + "more\n", False),
    ],
)
def test_the_seeding_digest_follows_every_file_that_can_write_a_store_and_no_other(tmp_path, file, edit, reseeds):
    source, lane = seeding_tree(tmp_path)
    before = lane_source.seeding(source, lane)
    assert before == {"sha256": before["sha256"], "search_only": ["src/rrf.rs"], "changed": []}
    path = source / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(edit(path.read_text() if path.exists() else ""))
    after = lane_source.seeding(source, lane)
    assert (after["sha256"] != before["sha256"]) == reseeds
    assert after["sha256"] == lane_source.seeding(source, lane)["sha256"]  # bytes, nothing else
    assert after["changed"] == ([file] if file in ("src/sqlite/mod.rs", "src/sqlite/import.rs") else [])


def test_once_a_seeding_file_differs_from_its_pin_no_file_is_left_out(tmp_path):
    """The search-only list was read against the seeding files' pinned bytes: an edited seeding file
    might call into a search-only one, so from then on an edit of the search-only file reseeds too."""
    source, lane = seeding_tree(tmp_path)
    schema = source / "src/sqlite/mod.rs"
    schema.write_text(schema.read_text() + "fn open() { crate::rrf::RrfConfig::default(); }\n")
    edited = lane_source.seeding(source, lane)
    assert edited["changed"] == ["src/sqlite/mod.rs"] and edited["search_only"] == []
    rrf = source / "src/rrf.rs"
    rrf.write_text(rrf.read_text().replace("25.0", "60.0"))
    assert lane_source.seeding(source, lane)["sha256"] != edited["sha256"]


def release_source() -> Path:
    """The pinned release's own sources (.ci/run's checkout fixture), else skipped."""
    folder = os.environ.get("VIPUNE_EVAL_CHECKOUT_FIXTURE")
    if not folder or not (Path(folder) / "Cargo.lock").is_file():
        pytest.skip("VIPUNE_EVAL_CHECKOUT_FIXTURE names no vipune source tree (.ci/run sets one up)")
    return Path(folder)


def test_the_pinned_release_leaves_out_every_search_only_file():
    found = lane_source.seeding(release_source())
    assert found["changed"] == [] and found["search_only"] == sorted(
        f["file"] for f in lane_source.listed()["seeding"]["search_only"]
    )


# Names a seeding item shares with a search-only file that are not that file's: each module's
# own `Result` alias of its error type; `new` and `all`, other types' constructors and SQL words.
NOT_THEIRS = {"Result", "new", "all"}


def test_no_item_the_seeding_runs_names_an_item_of_a_search_only_file():
    """The list's claim, read from the pinned release: the vipune-lane's seeding runs Database::open
    (create_schema, the migrations and their content hash), conn(), the error conversion from
    rusqlite and Database::insert_with_id; none of them names a function, type or constant that a
    search-only file defines (src/sqlite/mod.rs re-exports sqlite/embedding.rs's blob conversions
    for add's and update's inserts, items the seeding does not run)."""
    source = release_source()
    seeding = {
        "src/sqlite/mod.rs": ["fn open", "fn create_schema", "fn conn", "impl From<rusqlite::Error> for Error"],
        "src/sqlite/import.rs": ["fn insert_with_id"],
        "src/sqlite/migrations.rs": [None],
        "src/sqlite/hash.rs": [None],
        "src/sqlite/db_error.rs": [None],
    }
    assert sorted(seeding) == sorted(f["file"] for f in lane_source.listed()["seeding"]["seeding_files"])

    def code(text: str) -> str:
        while (tests := lane_source.rust_item(text, "mod tests")) is not None:
            text = text.replace(tests, "")
        return re.sub(r"//[^\n]*", "", text)

    ran = ""
    for file, items in seeding.items():
        text = (source / file).read_text()
        for item in items:
            found = code(text) if item is None else lane_source.rust_item(text, item)
            assert found, (file, item)
            ran += code(found)
    for entry in lane_source.listed()["seeding"]["search_only"]:
        defined = (
            set(
                re.findall(
                    r"\b(?:fn|struct|enum|const|static|type|trait|macro_rules!)\s+([A-Za-z_]\w*)",
                    code((source / entry["file"]).read_text()),
                )
            )
            - NOT_THEIRS
        )
        assert not [name for name in defined if re.search(rf"\b{name}\b", ran)], entry["file"]
