//go:build linux

package testbed

import "testing"

// TestParseCounters: the pairs of name and value lines of /proc/net/snmp and
// netstat, and one link's line of /proc/net/dev.
func TestParseCounters(t *testing.T) {
	out := map[string]uint64{}
	parseSNMP([]byte(`Ip: Forwarding DefaultTTL InReceives
Ip: 2 64 17
Tcp: RtoAlgorithm MaxConn RetransSegs
Tcp: 1 -1 5
TcpExt: SyncookiesSent TCPSynRetrans TCPDSACKOldSent
TcpExt: 0 3 641
`), out)
	parseNetDev([]byte(`Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
twtab12: 1200 20 0 1 0 0 0 0 60000 1000 0 42 0 0 0 0
`), "twtab12", out)
	want := map[string]uint64{
		"Ip.InReceives": 17, "Tcp.RetransSegs": 5, "TcpExt.TCPSynRetrans": 3, "TcpExt.TCPDSACKOldSent": 641,
		"link.rx_packets": 20, "link.rx_dropped": 1, "link.tx_packets": 1000, "link.tx_dropped": 42,
	}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s = %d, want %d", k, out[k], v)
		}
	}
	if _, ok := out["Tcp.MaxConn"]; ok {
		t.Error("Tcp.MaxConn (-1) taken for a counter")
	}
}
