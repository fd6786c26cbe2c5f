"""stages/report/sections/throughput.py: the report's "Embed throughput"."""

from __future__ import annotations

from support.report import markdown_of
from vipune_eval.stages.embed.tally import Tally
from vipune_eval.stages.report.report import build


def test_render_of_an_embed_stage_that_computed_nothing(loaded):
    loaded.tallies = [Tally(threads=2, job_seconds=1.5)]
    text = markdown_of(build(loaded))
    assert "no embed job timed a text" in text and "1.5 s" in text


def test_the_embed_projection_says_what_it_rests_on(loaded):
    text = markdown_of(build(loaded))
    line = next(line for line in text.splitlines() if line.strip().startswith("- what this projection rests on"))
    assert "this run's texts (mean 100 tokens; LongMemEval_M's session texts average 501" in line
    assert "calm 2-core machine" in line and "plan a LongMemEval_M run with that one" in line
