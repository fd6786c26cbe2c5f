"""report.md: the report's document (stages.report.sections) rendered as Markdown. Nothing is
worded here: each block of the document becomes its Markdown."""

from __future__ import annotations

from vipune_eval.stages.report.document import Block, Bullets, Document, Paragraph, Section, Table


def table(t: Table) -> list[str]:
    rule = "|" + "".join("---:|" if right else "---|" for right in t.right())
    return ["| " + " | ".join(t.columns) + " |", rule, *("| " + " | ".join(row) + " |" for row in t.rows)]


def bullets(b: Bullets) -> list[str]:
    lines = [b.lead] if b.lead else []
    for item in b.items:
        lines += [f"- {item.text}", *(f"  - {sub}" for sub in item.sub)]
    return lines


def block(b: Block) -> list[str]:
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Bullets):
        return bullets(b)
    assert isinstance(b, Paragraph)
    return [b.text]


def section(s: Section) -> str:
    """A section: its heading (none for an untitled one) and its blocks, a blank line apart; a
    section explaining a question has an anchor of its key (report.md#explain-<question_id>)."""
    heading = [f"{'#' * s.level} {s.title}"] if s.title else []
    if s.category is not None:
        heading = [f'<a id="{s.key}"></a>', *heading]
    return "\n\n".join(heading + ["\n".join(block(b)) for b in s.blocks])


def markdown(doc: Document) -> str:
    head = "\n".join([f"# {doc.title}", "", *(f"- {line}" for line in doc.scored)])
    return "\n\n".join([head, *map(section, doc.sections)]) + "\n"
