"""core/build_records.py: the shapes of a vipune build's records, shared by their writers and the report."""

from __future__ import annotations

from vipune_eval.core.build_records import PreflightCheck, VipuneFingerprint, VipuneLaneFingerprint
from vipune_eval.stages.report import report_json


def test_a_lane_fingerprint_names_its_binary_and_its_build():
    assert set(VipuneLaneFingerprint.__required_keys__) == {"kind", "id", "sha256", "version", "binary", "built"}
    assert set(VipuneFingerprint.__required_keys__) == {"kind", "id", "sha256", "version"}


def test_a_parity_check_records_its_lowest_cosine():
    assert "min_cosine" in PreflightCheck.__optional_keys__


def test_the_report_reads_these_shapes_not_copies_of_them():
    assert report_json.VipuneFingerprint is VipuneFingerprint
    assert report_json.VipuneLaneFingerprint is VipuneLaneFingerprint
