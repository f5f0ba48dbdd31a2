#!/bin/bash
# forward-bench.sh: `tcpwheel forward` against gVisor's forwarders, side by
# side, as tun2socks-style proxies run them: for each round and each stack
# (tcpwheel, gvisor, gvisor-gso; tcpwheel forward -stack), a forwarder in
# fresh client and server namespaces of its own, scripts/fwbench's servers
# in the server namespace (198.19.1.5) and the clients in the client
# namespace, each a process of its own: TCP and UDP pings (100 bytes, one
# at a time), a 200 MB download and upload by curl (MB/s, the forwarder's
# CPU s per GB), wrk keep-alive (50 connections, 5 s) and ab (20,000
# requests, a new connection each). Every client is bounded in count and
# time; the forwarder removes its namespaces on exit, and this script
# removes them too if it could not. Needs root, curl, wrk and ab.
#
# usage: scripts/forward-bench.sh [ROUNDS] [STACKS]   (default 3 "tcpwheel gvisor gvisor-gso")
set -u
cd "$(dirname "$0")/.."
rounds=${1:-3}
stacks=${2:-tcpwheel gvisor gvisor-gso}
[ "$(id -u)" = 0 ] || { echo "forward-bench: needs root" >&2; exit 1; }
for t in curl wrk ab; do command -v $t >/dev/null || { echo "forward-bench: $t is not installed" >&2; exit 1; }; done
make -s build || exit 1
work=$(mktemp -d)
go build -o "$work/fwbench" ./scripts/fwbench || exit 1
head -c 200000000 /dev/urandom > "$work/up.bin"
cns="" sns="" fp="" sp=""
cleanup() {
	[ -n "$sp" ] && kill "$sp" 2>/dev/null
	[ -n "$fp" ] && { kill -INT "$fp" 2>/dev/null; wait "$fp" 2>/dev/null; }
	for ns in $cns $sns; do ip netns del "$ns" 2>/dev/null; done
	cns="" sns="" fp="" sp=""
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; } # clock ticks (100 per second)
n=0
echo "round stack tcp_p50_us tcp_p99_us udp_p50_us udp_p99_us down_MBps up_MBps fwd_cpu_s_per_GB wrk_rps wrk_p99 ab_cps"
for r in $(seq 1 "$rounds"); do
	for st in $stacks; do
		n=$((n + 1))
		cns=twfbc$$-$n sns=twfbs$$-$n
		bin/tcpwheel forward -stack "$st" -netns "$cns" -server-netns "$sns" -tun "fbc$((n % 1000))$$" -server-tun "fbs$((n % 1000))$$" \
			-duration 600s > "$work/fwd.log" 2>&1 &
		fp=$!
		for i in $(seq 1 100); do ip netns exec "$cns" ip route 2>/dev/null | grep -q default && break; sleep 0.1; done
		ip netns exec "$sns" "$work/fwbench" serve 198.19.1.5 > "$work/srv.log" 2>&1 &
		sp=$!
		for i in $(seq 1 100); do ip netns exec "$cns" curl -s -m 1 -o /dev/null http://198.19.1.5/small && break; sleep 0.1; done
		inns() { ip netns exec "$cns" "$@"; }
		tcp=$(inns "$work/fwbench" ping tcp 198.19.1.5:9000 3000 | awk '{print $4, $8}')
		udp=$(inns "$work/fwbench" ping udp 198.19.1.5:9001 3000 | awk '{print $4, $8}')
		c0=$(cpu "$fp")
		down=$(inns curl -s -m 60 -o /dev/null -w "%{speed_download}" http://198.19.1.5/bytes/200000000)
		up=$(inns curl -s -m 60 -o /dev/null -H "Expect:" -T "$work/up.bin" -w "%{speed_upload}" http://198.19.1.5/upload)
		c1=$(cpu "$fp")
		wrk=$(inns wrk -t 2 -c 50 -d 5s --timeout 2s --latency http://198.19.1.5/small | awk '/Requests\/sec/{r=$2} /^ +99%/{p=$2} END{print r, p}')
		ab=$(inns ab -q -r -s 10 -t 60 -n 20000 -c 50 http://198.19.1.5/small 2>&1 | awk '/Requests per second/{print $4; f=1} END{if (!f) print "stalled"}')
		echo "$r $st ${tcp:-- -} ${udp:-- -} $(awk -v d="${down:-0}" -v u="${up:-0}" -v c=$((c1 - c0)) 'BEGIN{printf "%.0f %.0f %.3f", d/1e6, u/1e6, c/100/0.4}') ${wrk:-- -} $ab"
		cleanup
	done
done
