"""Each classroom lab's quick simulated version shows what its README says the student sees
(rmptwin.studies.labs: the same checks as labs/<name>/check.py), and a check fails on a run that
does not show it."""

from __future__ import annotations

import pandas as pd
import pytest

from rmptwin.studies.labs import LABS, check_fairness, run_quick


@pytest.mark.parametrize("name", sorted(LABS))
def test_lab_quick_version_shows_the_expected_outcome(name, tmp_path):
    checks = run_quick(name, tmp_path / "out")
    assert checks and all(c.ok for c in checks), "\n".join(c.line() for c in checks)


def test_fairness_check_fails_when_releases_spread_above_tau_t():
    df = pd.DataFrame({"protocol.delta_a_ms": [0, 200], "fairness_spread_ms.p99": [40.0, 3.0],
                       "delivery_latency_ms.p50": [80.0, 280.0]})
    checks = check_fairness(df, tau_t_ms=143)
    assert [c.ok for c in checks] == [False, True, True]


def test_every_lab_has_a_readme_with_commands_and_questions(repo):
    for name, lab in LABS.items():
        text = (repo / "labs" / name / "README.md").read_text()
        assert lab.experiment in text and "check.py" in text and "## Questions" in text
