// Package testbed is the one place where tcpwheel's tests, benchmarks and
// demos get a world to run in: a fresh network namespace whose kernel is the
// peer (addresses from 198.18.0.0/15, a fresh name per run), a TUN device
// whose kernel side lives in it, the device chain on the userspace side
// (impairment, an optional pcap tap, an optional watcher), and helpers that
// act as the kernel peer (listen, dial, run a command inside the namespace).
//
// It is used by the integration tests, by `tcpwheel compare` (package
// compare) and by `tcpwheel run`. Everything but Unavailable and RequireRoot
// needs root and /dev/net/tun.
package testbed
