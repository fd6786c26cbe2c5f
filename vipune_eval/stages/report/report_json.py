"""report.json's shape: the typed ``Report`` that stages.report.report writes and the report's
sections (stages.report.sections) and plots (stages.report.plots) read, and what more than one of
them reads from it (``primary_ks``, the headline's k and keys). No computation: the report's
commands share this module, and an edit here reruns only them. What report.json holds of a file
another stage writes is typed by that file's shape, in core/ (a run's metrics, a view's summary,
the fingerprints and build records, the corpus, the embed throughput)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from vipune_eval.core.build_records import LaneCopy as LaneCopy
from vipune_eval.core.build_records import PreflightResult as PreflightResult
from vipune_eval.core.build_records import VipuneFingerprint as VipuneFingerprint
from vipune_eval.core.build_records import VipuneLaneFingerprint as VipuneLaneFingerprint
from vipune_eval.core.embed_throughput import EmbedBlock
from vipune_eval.core.filter_summary import FilterSummary, Split
from vipune_eval.core.fingerprints import DatasetFingerprint as DatasetFingerprint
from vipune_eval.core.model_provenance import ModelProvenance as ModelProvenance
from vipune_eval.core.report_inputs import Corpus, ScoredWith
from vipune_eval.core.run_metrics import RetrieverEntry as RetrieverEntry
from vipune_eval.registry import measures
from vipune_eval.registry.views import PRIMARY


class ViewCounts(TypedDict):
    """A view's rows, the unique texts they hold and the tokens embedded (stages.report.report.load)."""

    rows: int
    unique_texts: int
    tokens_embedded: int


class ViewNumbers(ViewCounts):
    """A view's pairs, counts and retrievers: what the granularities set side by side."""

    pairs: int
    retrievers: dict[str, RetrieverEntry]


class ViewBlock(ViewNumbers):
    """One view: its protocol × granularity, its pairs and rows, and every retriever it scored."""

    protocol: str
    granularity: str
    description: str
    ks: list[int]
    scored_with: ScoredWith  # what every run of the view was scored with, and its searches ranked to
    qrels: str
    summary: FilterSummary
    measures: dict[str, str]  # measure → definition


class Compared(TypedDict):
    """One metric in one group of pairs, run a against run b (stages.report.compare)."""

    a: float
    b: float
    difference: float  # a − b
    interval: list[float]  # the difference's paired-bootstrap interval
    pairs: int
    a_better: int
    b_better: int
    test: str  # mcnemar-exact, paired-randomization
    p: float
    p_holm: float
    significant: bool


class Comparison(TypedDict):
    """Two runs compared pair by pair, overall and per category (stages.report.compare.compare_runs)."""

    overall: dict[str, Compared]  # metric key → its comparison
    per_category: dict[str, dict[str, Compared]]
    alpha: float
    confidence: float
    names: list[str]  # a, b
    correction: str
    comparisons: int
    summary: list[str]  # each significant difference in a sentence (or that there is none)


class BuildEntry(RetrieverEntry, total=False):
    """One vipune build: the primary first, each other compared with it."""

    id: str
    version: str
    sha256: str
    source: str | None
    lane: VipuneLaneFingerprint | None  # its vipune-lane's fingerprint (the lib lane's builds), as provenance.lane
    follows_contract: bool
    failed_checks: list[str]
    drift: list[str]
    comparison: Comparison
    changes: list[dict[str, Any]]


class WhatIfBase(TypedDict):
    """The what-if lab's base retriever: its measure on each split and its pairs there."""

    name: str
    params: dict[str, Any]
    run: str
    dev: float | None  # None: no pair on that split
    test: float | None
    pairs: dict[str, int]  # split → pairs


class WhatIfVariant(TypedDict):
    """A variant of the base: its measure on each split, its difference from the base on the
    confirmation split (None: no pair both scored there) with its interval and p, Holm's p."""

    name: str
    params: dict[str, Any]
    run: str
    dev: float | None
    test: float | None
    pairs: int  # the pairs of the confirmation split it and the base both scored
    test_delta: float | None
    p: float
    interval: list[float] | None
    p_holm: float


class _WhatIf(TypedDict):
    measure: str
    select_on: Split
    confirm_on: Split
    tried: int
    correction: str
    alpha: float
    base: WhatIfBase
    chosen: str | None  # None: no pair on the selection split
    chosen_is_base_setting: bool
    confirmed: bool
    variants: list[WhatIfVariant]
    grid: dict[str, list[Any]]  # the config's grid (core.report_inputs.LabManifest)


class WhatIf(_WhatIf, total=False):
    """report.json's ``whatif``: the variant chosen on one split, confirmed on the other
    (stages.report.whatif.analyse); ``best_on_<confirm_on>``: the best there (None: no pair)."""

    best_on_dev: str | None
    best_on_test: str | None


class Baseline(BuildEntry, total=False):
    """vipune.baseline's build entry, with its fingerprint."""

    vipune: VipuneFingerprint


class SplitEntry(TypedDict):
    pairs: int
    metrics: dict[str, float]
    intervals: dict[str, list[float] | None]


class SplitBlock(TypedDict):
    """A split of the primary view: its pairs and each retriever's numbers there."""

    pairs: int
    retrievers: dict[str, SplitEntry]


class Published(TypedDict):
    """LongMemEval's published figures (stages.report.published.PUBLISHED)."""

    source: str
    corpus: str
    retrievers: dict[str, dict[str, float]]  # the paper's row → metric key → figure
    ours: dict[str, str]  # the paper's row → the configured retriever that reproduces it


class BesidePublished(TypedDict):
    """A published row beside the retriever that reproduces it, with the corpus of each."""

    retriever: str
    paper: dict[str, float]
    paper_corpus: str
    ours_corpus: str
    ours_all: dict[str, float]  # its metrics_all: the set the paper's script averages
    ours_all_pairs: int
    ours: dict[str, float]
    ours_pairs: int


class Official(TypedDict):
    """LongMemEval's own protocol at session granularity, and the paper's figures beside it."""

    protocol: str
    pairs: int
    skipped_without_user_side_evidence: int
    pairs_with_empty_gold: int
    skip_rule: str
    qrels: str
    pairs_all: int
    ks: list[int]
    measures: dict[str, str]
    retrievers: dict[str, RetrieverEntry]
    published: Published
    beside_published: dict[str, BesidePublished]  # nothing unless the corpus is the paper's


class GranularityBlock(ViewNumbers, total=False):
    """One granularity of the seed protocol; every one but session compared with session."""

    vs_session: dict[str, Comparison]  # retriever → its paired comparison


class _Agreement(TypedDict):
    run: str
    mirror: str
    pairs: int  # the pairs both scored, on which their rankings are compared
    run_pairs: int
    mirror_pairs: int
    only_run: list[str]  # the pairs ``run`` scored and ``mirror`` did not
    only_mirror: list[str]


class LaneAgreement(_Agreement, total=False):
    """A lane against the run it must rank as (stages.report.diagnostics.agreement): besides these
    keys ``same_top{k}_share`` and ``differ_top{k}`` (the largest k) for the view's ks."""

    view: str  # diagnostics.lanes: the view compared (every view is)


def same_top_share(agree: LaneAgreement, k: int) -> float | None:
    """Its ``same_top{k}_share``: the share of the pairs both scored whose top k is the same (None: no pair)."""
    loose: Mapping[str, Any] = agree  # a key per k: beyond what a TypedDict can name
    share: float | None = loose[f"same_top{k}_share"]
    return share


def differ_top(agree: LaneAgreement, k: int) -> list[str]:
    """Its ``differ_top{k}``: the pairs whose top k differs (written for the view's largest k)."""
    loose: Mapping[str, Any] = agree  # a key per k: beyond what a TypedDict can name
    differ: list[str] = loose[f"differ_top{k}"]
    return differ


class GoldRanks(TypedDict):
    """Per pair of the subject retriever, the rank of each gold session (None: not retrieved),
    worst pairs first; besides these keys each pair has its recall@k and mrr."""

    retriever: str
    pairs: list[dict[str, Any]]  # question_id, question_type, gold_ranks, and the two measures


class Diagnostics(TypedDict, total=False):
    """Why vipune misses (stages.report.diagnostics); the keys of its agreements with its mirrors
    are registry.lanes' ``agreement`` (each Lane's ``agreement_keys``)."""

    truncation: dict[str, Any]  # its keys hold the headline measure's name (recall@k): not typed further
    bm25_and_query: dict[str, Any] | None  # likewise (hybrid_vs_hybrid_or_top{k}_differs)
    vipune_vs_hybrid: LaneAgreement | None
    vipune_semantic_vs_dense: LaneAgreement | None
    gold_ranks: GoldRanks
    lanes: list[LaneAgreement]  # vipune's own search code against the binary, in every view


def mirror_agreement(diagnostics: Diagnostics, key: str) -> LaneAgreement | None:
    """The agreement of a lane's run with its mirror under ``key`` (one of registry.lanes' ``agreement``)."""
    loose: Mapping[str, Any] = diagnostics  # registry.lanes names the keys, not a literal here
    agree: LaneAgreement | None = loose.get(key)
    return agree


class ExplainedHit(TypedDict):
    """A hit of a build's top 10, or a gold session outside it: its ranks and scores in vipune's
    semantic and BM25 arms ([rank, score]; None: not among that arm's candidates, or no arms)."""

    doc: str
    semantic: list[Any] | None
    bm25: list[Any] | None


class TopHit(ExplainedHit):
    gold: bool
    fused: float | None  # vipune's hybrid score (the arms' RRF fusion, checked)


class ExplainedColumn(TypedDict):
    """One build's side of an explanation (stages.report.explain)."""

    build: str
    retriever: str  # the run shown: vipune-lib, or vipune where the build has no lib lane
    k: float | None  # the RRF k the arms were fused with (None: no arms)
    arms: str | None  # why there are no arms (None: there are)
    mismatch: str | None  # why the arms do not explain the list (None: they do)
    failed: bool  # the build's search failed the pair: no list
    binary: list[str] | None  # the binary's top 10 where it differs from the lib lane's
    top: list[TopHit]
    gold_outside: list[ExplainedHit]  # each gold session not in the top 10


class Explanation(TypedDict):
    """Why a question ranked as it did in each build (stages.report.explain)."""

    question_id: str
    question: str
    question_type: str
    gold: list[str]
    builds: list[ExplainedColumn]  # the primary build first
    texts: dict[str, str]  # each session shown → the first 120 characters of its text


class Explanations(TypedDict):
    moved: list[str]  # the pairs a build of vipune.compare moved
    worst: list[str]  # the worst pairs of the diagnostics
    questions: dict[str, Explanation]


class SplitRule(TypedDict):
    seed: int
    dev_fraction: float
    rule: str


class Provenance(TypedDict):
    dataset: DatasetFingerprint
    model: ModelProvenance
    vipune: VipuneFingerprint | None  # the primary build's fingerprint
    lane: VipuneLaneFingerprint | None  # its vipune-lane's
    preflight: PreflightResult | None  # its preflight's checks
    builds: dict[str, VipuneFingerprint]  # build id → its fingerprint
    contract_release: str
    split: SplitRule
    views: dict[str, str]  # view name → its description
    config: dict[str, Any]
    package: dict[str, str]


class Report(TypedDict, total=False):
    """report.json. Every key is always written but ``baseline`` (a vipune.baseline is set),
    ``whatif`` (the lab is configured) and ``official`` (the official protocol at session
    granularity is configured); ``explanations`` is added by run_report after ``build`` (it reads
    the arms and texts of the pairs the report names)."""

    pairs: int
    qrels: str
    protocol: str
    measures: dict[str, str]  # measure → definition
    dataset: FilterSummary  # the primary view's
    retrievers: dict[str, RetrieverEntry]  # the primary view's entries
    retriever_order: list[str]  # the order tables and plots show them: vipune's lanes first
    retriever_settings: dict[str, dict[str, Any]]
    corpus: Corpus | None
    comparisons: dict[str, Comparison]  # "A vs B" → its paired comparison
    views: dict[str, ViewBlock]  # view name → its block, every view (the primary included)
    builds: list[BuildEntry]
    builds_compared_on: str | None  # the retriever the builds are compared by: vipune, or vipune-lib (the loop)
    baseline: Baseline
    splits: dict[str, SplitBlock]  # dev, test
    granularities: dict[str, GranularityBlock]
    whatif: WhatIf
    official: Official
    diagnostics: Diagnostics
    embed: EmbedBlock
    provenance: Provenance
    explanations: Explanations


def primary_ks(report: Report) -> list[int]:
    """The cut-offs of the primary view: the headline's, the plots' and the diagnostics'."""
    return report["views"][PRIMARY.name]["ks"]


def primary_k(report: Report) -> int:
    """The headline's k among them (registry.measures.primary_k): the diagnostics', the builds' lines'."""
    return measures.primary_k(primary_ks(report))


def primary_key(report: Report) -> str:
    """The headline measure at the headline's k (recall@5)."""
    return measures.key(measures.PRIMARY, primary_k(report))


def recall_keys(report: Report) -> list[str]:
    """The headline measure at each cut-off: the headline table's columns, the gate's measures."""
    return [measures.key(measures.PRIMARY, k) for k in primary_ks(report)]
