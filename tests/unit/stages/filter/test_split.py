"""The held-out split: stable, stratified by category, and the same whatever the order of the pairs."""

import pytest

from vipune_eval.stages.filter.split import DEV, TEST, assign


def pairs(per_category: dict[str, int]) -> list[tuple[str, str]]:
    return [(f"{category}-{i}", category) for category, n in per_category.items() for i in range(n)]


def test_each_category_gets_its_share_of_dev_pairs():
    labels = assign(pairs({"a": 10, "b": 5, "c": 1}), seed=0, dev_fraction=0.3)
    dev = {c: sum(1 for q, v in labels.items() if q.startswith(c) and v == DEV) for c in "abc"}
    assert dev == {"a": 3, "b": 2, "c": 0}  # round half up: 1.5 → 2, 0.3 → 0
    assert set(labels.values()) == {DEV, TEST}


def test_a_label_does_not_depend_on_the_order_of_the_pairs():
    given = pairs({"a": 20, "b": 7})
    assert assign(given, 1, 0.5) == assign(list(reversed(given)), 1, 0.5)


def test_the_seed_chooses_which_pairs_are_dev():
    given = pairs({"a": 40})
    assert assign(given, 1, 0.5) != assign(given, 2, 0.5)


@pytest.mark.parametrize("fraction,dev", [(0.0, 0), (1.0, 4)])
def test_the_ends_of_the_fraction(fraction, dev):
    assert list(assign(pairs({"a": 4}), 0, fraction).values()).count(DEV) == dev


def test_a_fraction_outside_0_to_1_is_refused():
    with pytest.raises(ValueError, match="split.dev_fraction must be in"):
        assign(pairs({"a": 2}), 0, 1.5)
