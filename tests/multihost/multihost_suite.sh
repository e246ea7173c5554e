#!/usr/bin/env bash
# multihost_suite.sh: what scripts/test.sh runs in the multi-host bed, from the build tree
# (configured there as run_multihost_suite.sh). On host 2 (`agent`): the testbed agent, until the
# harness powers the host off. On host 1 (`tests`): the `cluster`-labelled CTest suite (junit to
# /out/multihost.xml; the measured times, which are never asserted, to /out/multihost-times.txt). Exits with ctest's status.
set -u
cd "$(dirname "$0")"
case ${1:-} in
  agent)
    exec tests/multihost/rdmarpc_testbed_agent --listen tcp://10.0.0.2:7400 --soak tests/soak/rdmarpc_soak \
      --log-dir /tmp/testbed-agent-logs;;
  tests)
    # host 2 boots alongside; the tests' agent calls wait for it (wait_for_ready), but say so here
    for _ in $(seq 300); do ping -c 1 -W 1 10.0.0.2 >/dev/null 2>&1 && break; sleep 0.2; done
    ping -c 1 -W 1 10.0.0.2 >/dev/null 2>&1 || echo "multihost suite: host 2 (10.0.0.2) does not answer ping"
    export MULTIHOST_REPORT=${MULTIHOST_REPORT:-/out/multihost-times.txt}
    ctest -L cluster --output-on-failure --output-junit "${MULTIHOST_SUITE_JUNIT:-/out/multihost.xml}";;
  *) echo "usage: run_multihost_suite.sh agent|tests" >&2; exit 2;;
esac
