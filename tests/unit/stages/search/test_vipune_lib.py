"""stages/search/vipune_lib.py: where the lib lane's throwaway databases live. The lane's searches
themselves are tested through the workflow (tests/workflow/test_workflow.py, test_reruns.py) and
the lane's protocol in tests/unit/vipune/test_lane.py."""

from __future__ import annotations

from vipune_eval.stages.search.vipune_lib import database_folder


def test_the_databases_go_to_ram_in_a_folder_the_jobs_next_attempt_finds_and_empties(tmp_path):
    ram, tmp = tmp_path / "shm", tmp_path / "job-tmp"
    ram.mkdir()
    first = database_folder(tmp, ram)
    assert first.parent == ram and first.is_dir() and not tmp.exists()
    (first / "persona-7.db").write_bytes(b"left by a killed attempt")
    again = database_folder(tmp, ram)
    assert again == first and list(again.iterdir()) == []  # the same job's folder, emptied
    assert database_folder(tmp_path / "other-job", ram) != first


def test_without_ram_the_databases_go_to_the_jobs_scratch_folder_emptied(tmp_path):
    tmp = tmp_path / "job-tmp"
    tmp.mkdir()
    (tmp / "stale.db").write_bytes(b"x")
    assert database_folder(tmp, tmp_path / "no-shm") == tmp and list(tmp.iterdir()) == []
