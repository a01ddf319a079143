"""tests/budget.py: the extra interpreters draw a quarter of the property and fuzz examples,
never fewer than five (or the test's own count when that is smaller); a bad scale is refused."""

from __future__ import annotations

import pytest

from tests import budget


def test_the_full_count_unless_scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GH_RUN_EXAMPLES_SCALE", raising=False)
    assert budget.examples(300) == 300
    monkeypatch.setenv("GH_RUN_EXAMPLES_SCALE", "0.25")
    assert budget.examples(300) == 75
    assert budget.examples(8) == 5  # a floor of five examples
    assert budget.examples(3) == 3  # never more than the test asks for


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", "quarter"])
def test_a_bad_scale_is_refused(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("GH_RUN_EXAMPLES_SCALE", raw)
    with pytest.raises(ValueError, match="GH_RUN_EXAMPLES_SCALE"):
        budget.examples(100)
