// Package integration holds the tests in which the Linux kernel's TCP is the peer:
// each test makes its own network namespace, puts the kernel side of a TUN device
// in it (addresses from 198.18.0.0/15), and talks to tcpwheel's stack through it.
// They need root and /dev/net/tun; outside CI they skip without them, and with
// CI=true they fail.
package integration
