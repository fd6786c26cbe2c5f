//! Compiles vipune's own private search code into the lane: each file `vipune_sources.json`
//! lists under "compiled" is included by path from the vipune source the lane is built against
//! (`VIPUNE_LANE_VIPUNE_SRC`, set by .ci/vipune/build.sh), at the module path it has in vipune
//! (`src/memory/search.rs` → `crate::memory::search`), so an edit of that source is what runs.
//!
//! It also records what it compiled (`vipune-lane version`'s "sources"): the sha256 of each of
//! those files, of each item the lane copies, and of the whole vipune source the library is
//! compiled from, as they are when cargo compiles them (it reruns this script whenever any of them
//! changed for cargo): `VIPUNE_LANE_SOURCE_TOOL`, vipune_eval/vipune/lane_source.py `--sources`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=VIPUNE_LANE_VIPUNE_SRC");
    println!("cargo:rerun-if-env-changed=VIPUNE_LANE_SOURCE_TOOL");
    println!("cargo:rerun-if-changed=vipune_sources.json");
    let source = std::env::var("VIPUNE_LANE_VIPUNE_SRC").unwrap_or_else(|_| {
        panic!("VIPUNE_LANE_VIPUNE_SRC is not set: the lane compiles vipune's own search code from \
                the source it is built against; build it with .ci/vipune/build.sh")
    });
    let tool = std::env::var("VIPUNE_LANE_SOURCE_TOOL").unwrap_or_else(|_| {
        panic!("VIPUNE_LANE_SOURCE_TOOL is not set: the lane records the vipune source it compiles with \
                vipune_eval/vipune/lane_source.py; build it with .ci/vipune/build.sh")
    });
    for what in ["src", "Cargo.toml", "Cargo.lock", "build.rs"] {
        let path = Path::new(&source).join(what);
        if path.exists() {  // a missing path would rerun this script on every build
            println!("cargo:rerun-if-changed={}", path.display()); // a folder: everything it holds
        }
    }
    println!("cargo:rerun-if-changed={tool}");
    let recorded = Command::new("python3").arg(&tool).arg("--sources").arg(&source).output()
        .unwrap_or_else(|e| panic!("cannot run python3 {tool}: {e}"));
    assert!(recorded.status.success(), "python3 {tool} --sources {source} failed: {}",
            String::from_utf8_lossy(&recorded.stderr));
    let listed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("vipune_sources.json").expect("lane/vipune_sources.json"))
            .expect("lane/vipune_sources.json is not JSON");
    // module path ("memory") → its files (["store", "search"]) ; "" is the crate root
    let mut modules: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for file in listed["compiled"].as_array().expect("'compiled' is a list") {
        let file = file.as_str().expect("a compiled file is a path");
        let path = Path::new(&source).join(file);
        assert!(path.is_file(), "{} is missing: the lane compiles vipune's {file} and cannot be built \
                                 against {source}", path.display());
        let inner = file.strip_prefix("src/").expect("a compiled file is under src/").trim_end_matches(".rs");
        let (parent, name) = inner.rsplit_once('/').unwrap_or(("", inner));
        modules.entry(parent.to_string()).or_default().push((name.to_string(), path.display().to_string()));
    }
    let mut out = String::new();
    for (parent, files) in &modules {
        let declared: String = files
            .iter()
            .map(|(name, path)| {
                format!("#[path = {path:?}]\n#[allow(dead_code, unused_imports, clippy::all)]\npub(crate) mod {name};\n")
            })
            .collect();
        if parent.is_empty() {
            out.push_str(&declared);
        } else {
            assert!(!parent.contains('/'), "{parent}: one level of modules only");
            out.push_str(&format!("pub(crate) mod {parent} {{\n{declared}}}\n"));
        }
    }
    let out_dir = std::env::var("OUT_DIR").unwrap();
    std::fs::write(Path::new(&out_dir).join("vipune_source.rs"), out).expect("writing vipune_source.rs");
    std::fs::write(Path::new(&out_dir).join("vipune_sources.json"), recorded.stdout).expect("writing vipune_sources.json");
}
