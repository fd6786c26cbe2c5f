//! Compiles vipune's own private search code into the lane: each file `vipune_sources.json`
//! lists under "compiled" is included by path from the vipune source the lane is built against
//! (`VIPUNE_LANE_VIPUNE_SRC`, set by .ci/vipune/build.sh), at the module path it has in vipune
//! (`src/memory/search.rs` → `crate::memory::search`), so an edit of that source is what runs.
//!
//! It also records what it compiled (`vipune-lane version`'s "sources"): the sha256 of each of
//! those files, of each item the lane copies, and of the whole vipune source the library is
//! compiled from, as they are when cargo compiles them (it reruns this script whenever any of them
//! changed for cargo): `VIPUNE_LANE_SOURCE_TOOL`, vipune_eval/vipune/lane_source.py `--sources`.
//!
//! `src/rrf.rs` is compiled as `crate::rrf`'s inner module, its items re-exported, with
//! `rrf_fusion` wrapped (an item of the module shadows the glob import): each call records the
//! lists it is given (src/arms.rs) and then runs vipune's own fusion, so the lane records exactly
//! what the source's hybrid search fused. Where that source's `rrf_fusion` has another signature
//! the file is compiled plainly and the lane says why it records no arms (`UNRECORDED_ARMS`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=VIPUNE_LANE_VIPUNE_SRC");
    println!("cargo:rerun-if-env-changed=VIPUNE_LANE_SOURCE_TOOL");
    println!("cargo:rerun-if-env-changed=VIPUNE_LANE_PYTHON");
    println!("cargo:rerun-if-changed=vipune_sources.json");
    let source = std::env::var("VIPUNE_LANE_VIPUNE_SRC").unwrap_or_else(|_| {
        panic!(
            "VIPUNE_LANE_VIPUNE_SRC is not set: the lane compiles vipune's own search code from \
                the source it is built against; build it with .ci/vipune/build.sh"
        )
    });
    let tool = std::env::var("VIPUNE_LANE_SOURCE_TOOL").unwrap_or_else(|_| {
        panic!(
            "VIPUNE_LANE_SOURCE_TOOL is not set: the lane records the vipune source it compiles with \
                vipune_eval/vipune/lane_source.py; build it with .ci/vipune/build.sh"
        )
    });
    for what in ["src", "Cargo.toml", "Cargo.lock", "build.rs"] {
        let path = Path::new(&source).join(what);
        if path.exists() {
            // a missing path would rerun this script on every build
            println!("cargo:rerun-if-changed={}", path.display()); // a folder: everything it holds
        }
    }
    println!("cargo:rerun-if-changed={tool}");
    // the interpreter build.sh names (a version manager's python3 is a slower shell script)
    let python = std::env::var("VIPUNE_LANE_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let recorded = Command::new(&python)
        .arg(&tool)
        .arg("--sources")
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} {tool}: {e}"));
    assert!(
        recorded.status.success(),
        "{python} {tool} --sources {source} failed: {}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    let listed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("vipune_sources.json").expect("lane/vipune_sources.json"))
            .expect("lane/vipune_sources.json is not JSON");
    // module path ("memory") → its files (["store", "search"]) ; "" is the crate root
    let mut modules: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for file in listed["compiled"].as_array().expect("'compiled' is a list") {
        let file = file.as_str().expect("a compiled file is a path");
        let path = Path::new(&source).join(file);
        assert!(
            path.is_file(),
            "{} is missing: the lane compiles vipune's {file} and cannot be built \
                                 against {source}",
            path.display()
        );
        let inner = file.strip_prefix("src/").expect("a compiled file is under src/").trim_end_matches(".rs");
        let (parent, name) = inner.rsplit_once('/').unwrap_or(("", inner));
        modules.entry(parent.to_string()).or_default().push((name.to_string(), path.display().to_string()));
    }
    let mut out = String::new();
    let mut unrecorded = Some("the lane compiles no src/rrf.rs from this source".to_string());
    for (parent, files) in &modules {
        let declared: String = files
            .iter()
            .map(|(name, path)| {
                if parent.is_empty() && name == "rrf" {
                    let (module, why) = recorded_rrf(path);
                    unrecorded = why;
                    return module;
                }
                format!(
                    "#[path = {path:?}]\n#[allow(dead_code, unused_imports, clippy::all)]\npub(crate) mod {name};\n"
                )
            })
            .collect();
        if parent.is_empty() {
            out.push_str(&declared);
        } else {
            assert!(!parent.contains('/'), "{parent}: one level of modules only");
            out.push_str(&format!("pub(crate) mod {parent} {{\n{declared}}}\n"));
        }
    }
    out.push_str(&format!(
        "/// Why the lane records no arms of vipune's hybrid search (None: it records them).\n\
         pub(crate) const UNRECORDED_ARMS: Option<&str> = {};\n",
        unrecorded.map_or("None".to_string(), |why| format!("Some({why:?})"))
    ));
    let out_dir = std::env::var("OUT_DIR").unwrap();
    std::fs::write(Path::new(&out_dir).join("vipune_source.rs"), out).expect("writing vipune_source.rs");
    std::fs::write(Path::new(&out_dir).join("vipune_sources.json"), recorded.stdout)
        .expect("writing vipune_sources.json");
}

/// The signature of vipune's `rrf_fusion` the wrapper is written for, without whitespace.
const FUSION_SIGNATURE: &str =
    "pubfnrrf_fusion(result_lists:Vec<Vec<Memory>>,config:Option<RrfConfig>)->Result<Vec<Memory>,Error>";

/// `crate::rrf`: vipune's rrf.rs at `path` with its `rrf_fusion` wrapped to record the lists it
/// fuses (and None), or compiled plainly where its signature is not the wrapper's (and why).
fn recorded_rrf(path: &str) -> (String, Option<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let bare: String = text.chars().filter(|c| !c.is_whitespace()).collect::<String>().replace(",)", ")");
    if !bare.contains(FUSION_SIGNATURE) {
        let plain =
            format!("#[path = {path:?}]\n#[allow(dead_code, unused_imports, clippy::all)]\npub(crate) mod rrf;\n");
        return (
            plain,
            Some(format!(
                "{path}: its rrf_fusion has another signature than \
                                     (result_lists: Vec<Vec<Memory>>, config: Option<RrfConfig>) -> Result<Vec<Memory>, Error>, \
                                     so the lane cannot record the lists it fuses"
            )),
        );
    }
    let module = format!(
        "pub(crate) mod rrf {{\n\
         #[path = {path:?}]\n\
         #[allow(dead_code, unused_imports, clippy::all)]\n\
         mod inner;\n\
         #[allow(unused_imports)]\n\
         pub(crate) use inner::*;\n\
         /// vipune's `rrf_fusion`, its lists and k recorded first (crate::arms).\n\
         pub(crate) fn rrf_fusion(result_lists: Vec<Vec<crate::sqlite::Memory>>, config: Option<RrfConfig>)\n\
             -> Result<Vec<crate::sqlite::Memory>, crate::errors::Error> {{\n\
             crate::arms::record(&result_lists, config.unwrap_or_default().k);\n\
             inner::rrf_fusion(result_lists, config)\n\
         }}\n\
         }}\n"
    );
    (module, None)
}
