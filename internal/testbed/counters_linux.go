//go:build linux

package testbed

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// KernelCounters reads the namespace's kernel counters: every field of
// /proc/net/snmp and /proc/net/netstat as "Tcp.RetransSegs",
// "TcpExt.TCPSynRetrans", ..., and the TUN link's line of /proc/net/dev as
// "link.rx_packets", "link.rx_dropped", "link.tx_packets", "link.tx_dropped"
// (tx: towards the stack). The namespace is fresh for each bed, so they
// count what happened in it. Read from inside it (/proc/thread-self), since
// /proc/net is the namespace of the process's main thread.
func (b *Bed) KernelCounters() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := b.Do(func() error {
		for _, f := range []string{"snmp", "netstat"} {
			data, err := os.ReadFile("/proc/thread-self/net/" + f)
			if err != nil {
				return err
			}
			parseSNMP(data, out)
		}
		data, err := os.ReadFile("/proc/thread-self/net/dev")
		if err != nil {
			return err
		}
		parseNetDev(data, b.Link(), out)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: kernel counters: %w", err)
	}
	return out, nil
}

// parseSNMP reads the pairs of lines of /proc/net/snmp and netstat: a line
// of names and a line of values, each after the same "Group:" prefix.
func parseSNMP(data []byte, out map[string]uint64) {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		group, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if _, err := strconv.ParseInt(fields[0], 10, 64); err != nil {
			names = fields
			continue
		}
		for i, v := range fields {
			if i >= len(names) {
				break
			}
			// Negative values (Tcp.MaxConn) are not counters.
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				out[group+"."+names[i]] = n
			}
		}
	}
}

// parseNetDev reads link's line of /proc/net/dev.
func parseNetDev(data []byte, link string, out map[string]uint64) {
	names := []string{"rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_fifo", "rx_frame", "rx_compressed", "rx_multicast",
		"tx_bytes", "tx_packets", "tx_errors", "tx_dropped", "tx_fifo", "tx_colls", "tx_carrier", "tx_compressed"}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != link {
			continue
		}
		for i, v := range strings.Fields(rest) {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && i < len(names) {
				out["link."+names[i]] = n
			}
		}
	}
}
