#!/usr/bin/env bash
# Re-records the golden captures that stack/replay replays
# (integration/testdata/NAME.pcap and the replay script NAME.json beside each,
# and the stack's flight recording NAME.pcapng; only the flight recordings:
# go test ./integration -run '^TestRecordGolden$' -record-flight):
# for each scenario of integration/replay_record_test.go the stack runs on a TUN
# device whose kernel side lives in a fresh network namespace (198.18.0.0/15
# only), and a kernel socket is its peer. Each new capture is replayed at once.
# Needs root. Review the diff of testdata/ before committing: the kernel's
# behaviour (and so the captures) may change between kernel versions.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "record-golden: needs root (TUN devices and network namespaces)" >&2
	exit 1
fi
go test -count=1 -run '^TestRecordGolden$' ./integration -record -v "$@"
