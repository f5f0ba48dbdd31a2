#!/usr/bin/env bash
# Builds packetdrill out of tree: copies the source snapshot (GPLv2, a test tool
# we run, never part of this repository) to build/packetdrill-src and runs its
# ./configure && make there. The binary is build/packetdrill-src/gtests/net/
# packetdrill/packetdrill. PACKETDRILL_SRC names the snapshot (default
# ../shared/packetdrill beside the repository). Rebuilds only when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${PACKETDRILL_SRC:-$(cd .. && pwd)/shared/packetdrill}
out=build/packetdrill-src
bin=$out/gtests/net/packetdrill/packetdrill
if [ -x "$bin" ]; then
	exit 0
fi
if [ ! -f "$src/gtests/net/packetdrill/packetdrill.c" ]; then
	echo "packetdrill: no source snapshot at $src (set PACKETDRILL_SRC)" >&2
	exit 1
fi
rm -rf "$out"
mkdir -p build
# The snapshot may be read-only (CI's shared/ is): the copy must be writable
# for configure and make.
cp -R "$src" "$out"
chmod -R u+w "$out"
echo "packetdrill: building in $out" >&2
(cd "$out/gtests/net/packetdrill" && ./configure >/dev/null && make -j2 >make.log 2>&1) || {
	echo "packetdrill: build failed; see $out/gtests/net/packetdrill/make.log" >&2
	exit 1
}
