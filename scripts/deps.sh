#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine: ca-certificates (go
# fetches modules over HTTPS from the module proxy: a debootstrapped Debian has
# no CA bundle), iproute2 (ip, for inspecting namespaces), tcpdump (reads our
# pcaps), curl and python3 (kernel-side peers in integration tests),
# iputils-ping; gcc, make, bison and flex build packetdrill for make
# conformance; wrk and ab (apache2-utils) are, with curl, the real clients of
# tcpwheel compare's http-down, http-up, wrk and ab scenarios; dig
# (bind9-dnsutils) queries tcpwheel run's DNS responder in cmd/tcpwheel's
# TestServe. Installs only what is missing; needs root.
#
# `deps.sh run` (make run) installs only what `tcpwheel run` and the commands
# its ready line suggests need: ca-certificates, ip, curl, ping, nc, dig.
set -euo pipefail
need=()
[ -e /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v dig >/dev/null 2>&1 || need+=(bind9-dnsutils)
if [ "${1:-}" = run ]; then
	command -v nc >/dev/null 2>&1 || need+=(netcat-openbsd)
else
	command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
	command -v python3 >/dev/null 2>&1 || need+=(python3)
	command -v wrk >/dev/null 2>&1 || need+=(wrk)
	command -v ab >/dev/null 2>&1 || need+=(apache2-utils)
	# packetdrill (make conformance builds it from source).
	command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
	command -v make >/dev/null 2>&1 || need+=(make)
	command -v bison >/dev/null 2>&1 || need+=(bison)
	command -v flex >/dev/null 2>&1 || need+=(flex)
fi
if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${need[*]}; run as root (sudo make ${1:-test}) to install them" >&2
	exit 0
fi
echo "deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
