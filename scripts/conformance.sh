#!/usr/bin/env bash
# Runs the portable packetdrill scripts against tcpwheel (packetdrill's
# shared-object mode, build/packetdrill.so: no packet leaves the process) and,
# with --reference, against the Linux kernel (packetdrill's local mode, each
# script inside a fresh network namespace of its own).
#
#   scripts/conformance.sh [--reference] [--update] [--results FILE] [SCRIPT...]
#
# SCRIPTs are paths relative to gtests/net of the snapshot; default: every
# script in PORTABLE-TCP-SCRIPTS.txt, then conformance/scripts/*.pkt (ours).
# Prints one line per script (PASS, or FAIL and packetdrill's first error
# line) and a summary. Exits non-zero only on a regression (a script that
# conformance/expected.txt lists as passing fails) or a crash of the shim;
# --update rewrites expected.txt from this run instead. --results writes the
# table (tcpwheel, and Linux with --reference) to FILE.
#
# The scripts' shell commands set Linux sysctls (common/defaults.sh,
# set_sysctls.py, sysctl, tc, ethtool). In the tcpwheel run they run against
# stand-ins that only record the sysctls in a file the shim reads (so a script
# that turns timestamps off gets a stack without them), and tc's root qdisc
# there too (one that drops everything makes the shim's device drop the
# stack's packets and say so to its TCP), inside a namespace of
# their own as well, so that no command of a script can reach the host's
# settings. packetdrill runs with a private /tmp bound to one in the run's
# temporary directory. Everything lives in that directory and the namespaces
# this run creates; the trap removes them, also on failure or interrupt.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

reference=0 update=0 results=""
scripts=()
while [ $# -gt 0 ]; do
	case "$1" in
	--reference) reference=1 ;;
	--update) update=1 ;;
	--results) results=$2; shift ;;
	-*) echo "conformance: unknown flag $1" >&2; exit 2 ;;
	*) scripts+=("$1") ;;
	esac
	shift
done

if [ "$(id -u)" -ne 0 ]; then
	echo "conformance: needs root (packetdrill locks its memory; the runs use network namespaces)" >&2
	exit 2
fi

ipbin=$(command -v ip) || { echo "conformance: needs ip (iproute2; make deps)" >&2; exit 2; }
src=${PACKETDRILL_SRC:-$(cd .. && pwd)/shared/packetdrill}
pd=$repo/build/packetdrill-src/gtests/net/packetdrill/packetdrill
so=$repo/build/packetdrill.so
expected=$repo/conformance/expected.txt
for f in "$pd" "$so" "$src/PORTABLE-TCP-SCRIPTS.txt"; do
	[ -e "$f" ] || { echo "conformance: missing $f (make conformance builds it)" >&2; exit 2; }
done
if [ ${#scripts[@]} -eq 0 ]; then
	mapfile -t scripts < <(grep -v '^[[:space:]]*\(#\|$\)' "$src/PORTABLE-TCP-SCRIPTS.txt")
	for f in conformance/scripts/*.pkt; do
		[ -e "$f" ] && scripts+=("tcpwheel/${f#conformance/scripts/}")
	done
fi

# Addresses: 198.18.0.0/15 only (the network rule).
local_ip=198.18.0.1 remote_ip=198.19.0.2 gateway_ip=198.18.0.1 netmask_ip=255.255.0.0
addrs=(--ip_version=ipv4 --local_ip=$local_ip --remote_ip=$remote_ip --gateway_ip=$gateway_ip --netmask_ip=$netmask_ip)

# packetdrill gets a private /tmp of its own (run): $tmp/ptmp bound over /tmp
# in a mount namespace. A checkout under /tmp (a CI clone) would vanish under
# it, so the checkout is bound into ptmp at its own path first.
repo_real=$(cd "$repo" && pwd -P)
private_tmp='mount --bind "$0" /tmp && exec "$@"'
case $repo_real in
/tmp/*)
	private_tmp='mkdir -p "$0'"${repo_real#/tmp}"'" && mount --bind "'"$repo_real"'" "$0'"${repo_real#/tmp}"'" && mount --rbind "$0" /tmp && exec "$@"'
	;;
esac
mkdir -p build
tmp=$(mktemp -d "$repo/build/conformance.XXXXXX")
namespaces=()
cleanup() {
	local ns
	for ns in "${namespaces[@]}"; do
		[ -n "$ns" ] && "$ipbin" netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

newns() {
	local ns=pdconf-$$-$RANDOM-$1
	"$ipbin" netns add "$ns"
	"$ipbin" -n "$ns" link set lo up
	echo "$ns"
}

# The script trees: ref/ as upstream (its git symlinks made symlinks again),
# so/ with the stand-ins.
mkdir -p "$tmp/ref" "$tmp/so" "$tmp/bin"
for t in ref so; do
	cp -r "$src/gtests/net/." "$tmp/$t/"
	mkdir -p "$tmp/$t/tcpwheel"
	cp conformance/scripts/*.pkt "$tmp/$t/tcpwheel/" 2>/dev/null || true
	chmod -R u+w "$tmp/$t"
	ln -sf ../../common/defaults.sh "$tmp/$t/tcp/common/defaults.sh"
	ln -sfn ../tcp/common "$tmp/$t/tcpwheel/common" 2>/dev/null || true
done
sysctls=$tmp/sysctls
# defaults.sh's stand-in records the TCP defaults it would set.
cat >"$tmp/so/common/defaults.sh" <<EOF
#!/bin/sh
cat >"$sysctls" <<'END'
net.ipv4.tcp_timestamps=1
net.ipv4.tcp_sack=1
net.ipv4.tcp_dsack=1
net.ipv4.tcp_slow_start_after_idle=0
END
EOF
# set_sysctls.py's: records /proc/sys/net/ipv4/NAME=VALUE as
# net.ipv4.NAME=VALUE and leaves the restore script the test runs at its end.
cat >"$tmp/so/tcp/common/set_sysctls.py" <<EOF
#!/bin/sh
for a in "\$@"; do
	k=\${a%%=*}; k=\${k#/proc/sys/}
	echo "\$(echo "\$k" | tr / .)=\${a#*=}" >>"$sysctls"
done
printf '#!/bin/sh\nexit 0\n' >/tmp/sysctl_restore_\$PACKETDRILL_PID.sh
chmod +x /tmp/sysctl_restore_\$PACKETDRILL_PID.sh
EOF
# sysctl's: records name=value; ethtool and ip do nothing.
cat >"$tmp/bin/sysctl" <<EOF
#!/bin/sh
for a in "\$@"; do
	case "\$a" in -*) ;; *=*) echo "\$a" >>"$sysctls" ;; esac
done
EOF
for c in ethtool ip; do printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/$c"; done
# tc's: a root qdisc that drops every packet (pfifo or bfifo, limit 0) is
# recorded as tc.qdisc.root=drop, its deletion as none, any other root
# qdisc as other (not modelled: it passes everything); the shim's device
# drops the stack's packets while it is "drop" (conformance/pdshim/qdisc.go).
cat >"$tmp/bin/tc" <<EOF
#!/bin/sh
args=" \$* "
case "\$args" in
*" qdisc "*" root "*) ;;
*) exit 0 ;;
esac
case "\$args" in
*" qdisc del "*|*" qdisc delete "*) echo tc.qdisc.root=none >>"$sysctls" ;;
*" pfifo limit 0 "*|*" bfifo limit 0 "*) echo tc.qdisc.root=drop >>"$sysctls" ;;
*) echo tc.qdisc.root=other >>"$sysctls" ;;
esac
EOF
chmod +x "$tmp/so/common/defaults.sh" "$tmp/so/tcp/common/set_sysctls.py" "$tmp/bin/"*

# run MODE SCRIPT: runs one script; prints "PASS", "FAIL <first error>" or
# "CRASH <why>".
run() {
	local mode=$1 script=$2 dir base out rc ns line note
	dir=$tmp/$mode/$(dirname "$script") base=$(basename "$script")
	out=$tmp/out.$mode
	[ -f "$dir/$base" ] || { echo "FAIL no such script"; return; }
	rm -f "$sysctls"
	ns=$(newns "$mode")
	namespaces+=("$ns")
	# packetdrill runs with a private /tmp (a mount namespace of its own, in
	# which our directory ptmp is bound over /tmp): what it and the scripts
	# write there (the Python of code events, set_sysctls.py's restore
	# script) stays in $tmp, even when packetdrill dies.
	rm -rf "$tmp/ptmp"
	mkdir "$tmp/ptmp"
	local cmd=("$ipbin" netns exec "$ns")
	if [ "$mode" = so ]; then
		# LD_PRELOAD (packetdrill alone) lets the shim answer the direct
		# getsockopt(TCP_INFO) of the scripts' code events (shim.c).
		cmd+=(env LD_PRELOAD="$so" "$pd" "${addrs[@]}" --so_filename="$so" --so_flags="local=$local_ip sysctls=$sysctls")
	else
		cmd+=("$pd" "${addrs[@]}")
	fi
	# PDCONF_ARGS: more packetdrill flags (-v) for one debugging run.
	# shellcheck disable=SC2206
	cmd+=(${PDCONF_ARGS:-})
	rc=0
	(cd "$dir" && PATH="$([ "$mode" = so ] && echo "$tmp/bin:")$PATH" timeout -k 5 60 \
		unshare --mount --propagation private sh -c "$private_tmp" "$tmp/ptmp" \
		"${cmd[@]}" "$base") >"$out" 2>&1 || rc=$?
	"$ipbin" netns del "$ns"
	namespaces=("${namespaces[@]/$ns/}")
	if grep -q -m1 -e '^panic:' -e '^fatal error:' -e 'SIGSEGV' "$out" || { [ "$rc" -ge 128 ] && [ "$rc" -ne 137 ]; }; then
		line=$(grep -m1 -e '^panic:' -e '^fatal error:' -e 'SIG' "$out" || echo "exit status $rc")
		echo "CRASH $line"
		return
	fi
	if [ "$rc" -eq 0 ]; then
		echo PASS
		return
	fi
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "FAIL timed out (60 s of real time)"
		return
	fi
	# PDCONF_VERBOSE=1: all of packetdrill's output, on stderr.
	[ -n "${PDCONF_VERBOSE:-}" ] && sed 's/^/    | /' "$out" >&2
	line=$(grep -m1 -E '\.pkt:[0-9]+: ' "$out" || grep -m1 -v '^\s*$' "$out" || echo "exit status $rc")
	# A note of the shim's (unsupported, would block) says why.
	note=$(grep -m1 -E '^(unsupported: |pdshim: )' "$out" || true)
	echo "FAIL ${line}${note:+ [$note]}"
}

declare -A want
if [ -f "$expected" ]; then
	while read -r s r; do
		case "$s" in ''|\#*) continue ;; esac
		want[$s]=$r
	done <"$expected"
fi

pass=0 total=0 exp_pass=0 regressions=0 crashes=0 own=0 own_pass=0
table=$tmp/table
for s in "${scripts[@]}"; do
	total=$((total + 1))
	case "$s" in tcpwheel/*) own=$((own + 1)) ;; esac
	r=$(run so "$s")
	w=${want[$s]:-fail}
	[ "$w" = pass ] && exp_pass=$((exp_pass + 1))
	case "$r" in
	PASS) pass=$((pass + 1)); status=PASS ;;
	CRASH*) crashes=$((crashes + 1)); status=CRASH ;;
	*) status=FAIL ;;
	esac
	mark=""
	case "$s" in tcpwheel/*) [ "$status" = PASS ] && own_pass=$((own_pass + 1)) ;; esac
	if [ "$w" = pass ] && [ "$status" != PASS ]; then
		regressions=$((regressions + 1)); mark=" (REGRESSION: expected to pass)"
	elif [ "$w" != pass ] && [ "$status" = PASS ]; then
		mark=" (newly passing: update conformance/expected.txt)"
	fi
	printf '%-60s %s%s\n' "$s" "$r" "$mark"
	ref=""
	if [ $reference -eq 1 ]; then
		ref=$(run ref "$s")
		printf '%-60s linux: %s\n' "" "$ref"
	fi
	printf '%s\t%s\t%s\n' "$s" "$r" "$ref" >>"$table"
done

if [ $update -eq 1 ]; then
	{
		echo "# Expected results of make conformance (scripts/conformance.sh --update)."
		echo "# A script listed as pass that fails is a regression: make conformance fails."
		while IFS=$'\t' read -r s r _; do
			[ "$r" = PASS ] && echo "$s pass" || echo "$s fail"
		done <"$table"
	} >"$expected"
	echo "conformance: wrote $expected"
fi

if [ -n "$results" ]; then
	{
		echo "# packetdrill conformance: the portable scripts, tcpwheel (shared-object mode,"
		echo "# virtual time) and the Linux kernel (local mode in a fresh network namespace)."
		echo "# $(date -u +%Y-%m-%d), kernel $(uname -r), snapshot $(sed -n 's/^Upstream: .*commit \([0-9a-f]*\).*/\1/p' "$src/SNAPSHOT.md")"
		echo "# script | tcpwheel | linux"
		while IFS=$'\t' read -r s r ref; do
			printf '%s\n  tcpwheel: %s\n  linux:    %s\n' "$s" "$r" "${ref:-not run}"
		done <"$table"
		echo "# tcpwheel: $pass of $total pass (upstream $((pass - own_pass)) of $((total - own)), ours $own_pass of $own)"
		if [ $reference -eq 1 ]; then
			echo "# linux: $(cut -f3 "$table" | grep -c '^PASS') of $total pass"
		fi
		if [ -f conformance/causes.txt ]; then
			echo
			cat conformance/causes.txt
		fi
	} >"$results"
	echo "conformance: wrote $results"
fi

echo "conformance: $pass of $total scripts pass (expected $exp_pass): upstream $((pass - own_pass)) of $((total - own)), ours (conformance/scripts) $own_pass of $own"
if [ $reference -eq 1 ]; then
	echo "conformance: linux (local mode): $(cut -f3 "$table" | grep -c '^PASS') of $total scripts pass"
fi
if [ $crashes -gt 0 ] || { [ $regressions -gt 0 ] && [ $update -eq 0 ]; }; then
	echo "conformance: $regressions regression(s), $crashes crash(es)" >&2
	exit 1
fi
