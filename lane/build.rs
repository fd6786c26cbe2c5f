//! Compiles vipune's own private search code into the lane: each file `vipune_sources.json`
//! lists under "compiled" is included by path from the vipune source the lane is built against
//! (`VIPUNE_LANE_VIPUNE_SRC`, set by .ci/vipune/build.sh), at the module path it has in vipune
//! (`src/memory/search.rs` → `crate::memory::search`), so an edit of that source is what runs.

use std::collections::BTreeMap;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=VIPUNE_LANE_VIPUNE_SRC");
    println!("cargo:rerun-if-changed=vipune_sources.json");
    let source = std::env::var("VIPUNE_LANE_VIPUNE_SRC").unwrap_or_else(|_| {
        panic!("VIPUNE_LANE_VIPUNE_SRC is not set: the lane compiles vipune's own search code from \
                the source it is built against; build it with .ci/vipune/build.sh")
    });
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
    let target = Path::new(&std::env::var("OUT_DIR").unwrap()).join("vipune_source.rs");
    std::fs::write(target, out).expect("writing vipune_source.rs");
}
