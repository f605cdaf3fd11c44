#!/bin/sh
# Writes cmd/shoal/testdata/compat-COMMIT.tar.gz: the data directories of a
# manager and an agent that the binary built at COMMIT wrote (services,
# tasks with addresses, a node with labels, a network, settings, a removed
# service, a paused update, a write with a request ID, a snapshot in every
# group and entries after it), for TestOldDataDirStarts. Takes a few
# minutes: the old binary has no flag for an earlier snapshot, so it
# writes 4,096 entries per group.
#
#   scripts/make-compat-fixture.sh 8309538
set -eu
rev=${1:?usage: $0 COMMIT}
cd "$(dirname "$0")/.."
exec go test ./cmd/shoal -run '^TestMakeCompatFixture$' -count=1 -v -timeout 30m -args -make-compat-fixture="$rev"
