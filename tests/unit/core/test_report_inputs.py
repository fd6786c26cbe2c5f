"""The report's manifest: a path it names, found in a finished run copied elsewhere."""

from pathlib import Path

import pytest

from vipune_eval.core import paths
from vipune_eval.core.report_inputs import under


def test_a_manifest_path_is_found_under_the_run_folder_it_was_copied_to(tmp_path):
    assert under(tmp_path, paths.REPORT_MANIFEST) == tmp_path / Path(paths.REPORT_MANIFEST).relative_to(paths.RESULTS)
    assert under(tmp_path, f"{paths.RESULTS}/turn/filter/pairs.parquet") == tmp_path / "turn/filter/pairs.parquet"
    with pytest.raises(ValueError):  # a path outside results/ is no path of the manifest
        under(tmp_path, "elsewhere/pairs.parquet")
