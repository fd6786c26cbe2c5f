//! The arms of vipune's hybrid search: the lists its `rrf_fusion` is given, recorded by the
//! wrapper lane/build.rs puts around that function (`crate::rrf`, compiled from the source under
//! test), with the RRF k that call fuses with, before vipune's own fusion runs. What is recorded
//! is what the source's `search_hybrid` fused, in its order, with its candidate pool: the lane
//! copies none of it.

use std::cell::RefCell;

use serde_json::{Value, json};

use crate::sqlite::Memory;

thread_local! {
    /// Each `rrf_fusion` call since the last `take`: {"k", "lists": [[[id, score], ...], ...]}.
    static FUSIONS: RefCell<Vec<Value>> = const { RefCell::new(Vec::new()) };
}

/// Called by the wrapped `rrf_fusion` with the lists it fuses, best first, and its k.
#[allow(dead_code)] // where the source's rrf_fusion cannot be wrapped (build.rs), nothing calls it
pub(crate) fn record(lists: &[Vec<Memory>], k: f64) {
    let lists: Vec<Value> =
        lists.iter().map(|list| list.iter().map(|m| json!([m.id, m.similarity])).collect()).collect();
    FUSIONS.with(|f| f.borrow_mut().push(json!({"k": k, "lists": lists})));
}

/// The fusions recorded since the last call, in call order (and forgets them).
pub(crate) fn take() -> Vec<Value> {
    FUSIONS.with(|f| std::mem::take(&mut *f.borrow_mut()))
}
