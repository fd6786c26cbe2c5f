"""The vipune release the harness's contract was checked against (docs/vipune-contract.md).

The one place the pin lives: ``.ci/vipune/build.sh`` builds this release by default (it reads
the line below), CI's real-binary tests run it, and every report names it beside the version of
each build it evaluated. Only the report imports it, so moving the pin reruns nothing else.
"""

RELEASE = "0.20.2"
