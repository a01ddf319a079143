"""`parsable_job_id`: the job id in what `sbatch --parsable` prints, around whatever a site's
wrapper or plugins print (issue 26, class 5); the same through the real sbatch on the dev
cluster in tests/integration/test_sbatch_answers.py."""

from __future__ import annotations

import pytest

from orchestrator.executors.slurm import parsable_job_id


@pytest.mark.parametrize(
    "stdout, job_id",
    [
        ("123\n", "123"),
        ("123;dev\n", "123"),  # -M / a federation: the cluster after the id
        ("4567_3\n", "4567"),
        ("Welcome to Alps.\nQuota: 80% used\n88\nBye\n", "88"),
        ("  99  \n", "99"),
        ("\n\n77;cluster-a.b\n", "77"),
        ("sbatch: WARNING: x\n5", "5"),
        ("Jobs ahead of you:\n12345\n678\n", None),  # two lines read as answers: unclear
        ("", None),
        ("Submitted batch job 42\n", None),  # not --parsable's answer: found by name
        ("12a\n", None),
        ("-5\n", None),
        ("1;\n", None),
    ],
)
def test_the_one_line_that_is_an_answer(stdout: str, job_id: str | None) -> None:
    assert parsable_job_id(stdout) == job_id
