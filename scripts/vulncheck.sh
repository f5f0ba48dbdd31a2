#!/usr/bin/env bash
# Known vulnerabilities reachable from our code: govulncheck over both modules,
# against a pinned snapshot of the Go vulnerability database.
#
# The database is built here from the golang.org/x/vulndb module (its OSV files,
# indexed by that module's own cmd/indexdb), fetched through the Go module proxy
# like any dependency, so the check needs no other host and gives the same answer
# until VULNDB_VERSION is moved on. Exit status: govulncheck's (3 when a
# vulnerability is reachable).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-v1.9.0}

db=build/vulndb/$VULNDB_VERSION
if [ ! -s "$db/index/modules.json" ]; then
	src=$(GOWORK=off GOFLAGS=-mod=mod "$GO" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ ! -d "$src/data/osv" ]; then
		echo "vulncheck: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv (got '$src')" >&2
		exit 1
	fi
	rm -rf "$db.tmp"
	mkdir -p "$(dirname "$db")"
	"$GO" run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$src/data/osv" -out "$db.tmp"
	mv "$db.tmp" "$db"
fi
echo "vulncheck: $("$GO" version), database golang.org/x/vulndb@$VULNDB_VERSION ($(ls "$db/ID" | grep -c "\.json$") entries)"
exec "$GO" run "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" -db "file://$PWD/$db" ./... ./cmd/tcpwheel/...
