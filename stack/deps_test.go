package stack

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoGopacketLinked: a program that links the stack or the pcap tap
// does not link gopacket. Its layers package has 5 MB of global tables
// with pointers (EthernetTypeMetadata, PPPTypeMetadata), which the garbage
// collector scans at every cycle: most of the marking work of a server
// whose own heap is a few MB (the recorder and the tap write their pcapng
// and pcap files themselves; tests may still read them with gopacket).
func TestNoGopacketLinked(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no go tool to list the packages' dependencies")
		}
		t.Skip("no go tool")
	}
	out, err := exec.Command(gotool, "list", "-deps",
		"github.com/tcpwheel/tcpwheel/stack", "github.com/tcpwheel/tcpwheel/tun/pcaptap").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/google/gopacket") {
			t.Errorf("the stack links %s", p)
		}
	}
}
