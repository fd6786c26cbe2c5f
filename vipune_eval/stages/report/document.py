"""The report as a document: what every rendering shows, built once (stages.report.sections) and
rendered to Markdown (report.md, stages.report.markdown), HTML (the HTML report's pages,
stages.report.report_page) and plain text (the closing summary, stages.report.summary).

A text is a line or sentence that may hold report.md's two inline marks, `code` and **bold**:
Markdown keeps them, the HTML turns them into tags, the plain text drops them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vipune_eval.core.intervals import MIN_BOOTSTRAP_PAIRS

NO_INTERVAL = "no CI"
NO_INTERVAL_NOTE = (
    f"`{NO_INTERVAL}`: fewer than {MIN_BOOTSTRAP_PAIRS} pairs, too few for a bootstrap interval "
    "(resampling so few values gives none worth the name; recall_any and recall_all keep "
    "their Wilson intervals)."
)


def cell(value: float, interval: list[float] | None) -> str:
    """A value with its 95% interval; None: the score stage gave none (too few pairs)."""
    if interval is None:
        return f"{value:.3f} [{NO_INTERVAL}]"
    return f"{value:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def one_line(text: str, chars: int) -> str:
    """A text on one line, cut to ``chars`` characters (its last an ellipsis where it was cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def plain(text: str) -> str:
    """A text without its inline marks (for a terminal)."""
    return text.replace("`", "").replace("**", "")


@dataclass(frozen=True)
class Table:
    """Rows of cells under named columns. ``numeric``: the columns whose cells align right (by
    default every column but the first); ``marked``: the rows of vipune's own lanes, which the
    HTML shows stronger."""

    columns: list[str]
    rows: list[list[str]]
    numeric: list[bool] | None = None
    marked: frozenset[int] = frozenset()

    def right(self) -> list[bool]:
        return self.numeric if self.numeric is not None else [i > 0 for i in range(len(self.columns))]

    def shows_no_interval(self) -> bool:
        return any(f"[{NO_INTERVAL}]" in c for row in self.rows for c in row)


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Item:
    """A bullet and the bullets under it."""

    text: str
    sub: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Bullets:
    """A list; ``lead``: a line right above it that introduces it (a comparison's name)."""

    items: list[Item]
    lead: str | None = None


Block = Table | Paragraph | Bullets


@dataclass(frozen=True)
class Section:
    """A titled part of the report. ``key`` names it for what stands beside it (a plot names the
    key of its section: stages.report.plots.PLOTS); ``level`` 2 is a section, 3 a part of the one
    before it. ``category``: a section that explains one question has its question's category
    (the HTML filters them by it, and finds each by its key: ``explain-<question_id>``)."""

    key: str
    title: str
    blocks: list[Block]
    level: int = 2
    category: str | None = None


@dataclass(frozen=True)
class Document:
    """The whole report. ``scored``: what was scored, a line each (the vipune build, the model, the
    dataset, the corpus, the protocol); ``identity``: the lines of it a terminal shows first (the
    build, the model, the data); ``warnings``: what changes the reading of the numbers;
    ``headline``: each retriever's pairs and recall@k, vipune's lanes first; ``builds``: each
    compared build's difference from the primary in a line; ``sections``: report.md's body."""

    title: str
    pairs: int
    protocol: str
    scored: list[str]
    identity: list[str]
    warnings: list[str]
    headline: Table
    primary_build: str | None  # the build the others are compared with, and where it came from
    primary_source: str | None
    builds: list[str]
    sections: list[Section]

    def section(self, key: str) -> Section | None:
        return next((s for s in self.sections if s.key == key), None)
