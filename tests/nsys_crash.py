"""nsys's own failures under load, told apart from gh-run's. Recording tests take turns on the
machine's one nsys slot (tests/conftest.py, nsys_recording), yet on CI's two cores, with the
unit and integration streams side by side, nsys has still died inside itself now and then and
recorded nothing:

- 2022.4's launcher: "QuadD/Common/ProcessWaiter/Src/POSIX/ProcessWaiterImpl.cpp(166): Throw in
  function ..." (unit, Python 3.13);
- 2024.2 inside the container: "Connection to Agent lost. This is most likely a bug. Internal
  reason: 'Connection reset by peer'." (integration, test_profiled);
- 2023.4: "Local Endpoint is not available" (a second session recording at the same moment).

What these tests examine is what gh-run does around nsys, so a run that failed with one of
these texts is made again, once; any other failure stands, and a second crash fails the test."""

from __future__ import annotations

ATTEMPTS = 2


def crashed(text: str) -> bool:
    """Whether `text` (a job's stderr, or the CLI's tail of it) shows nsys failing inside itself."""
    return (
        ("/QuadD/" in text and "Throw in function" in text)
        or "Connection to Agent lost" in text
        or "Local Endpoint is not available" in text
    )
