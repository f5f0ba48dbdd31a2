package pdshim

import (
	"os"
	"path/filepath"
	"testing"
)

// TestQdiscStandIn: the device drops while the tc stand-in's last word on
// the root qdisc is "drop", and reads the file again when it changes.
func TestQdiscStandIn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sysctls")
	q := &qdisc{path: path}
	if q.dropping() {
		t.Fatal("no file: dropping")
	}
	add := func(line string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, step := range []struct {
		line string
		drop bool
	}{
		{"net.ipv4.tcp_sack=1", false},
		{"tc.qdisc.root=none", false},
		{"tc.qdisc.root=drop", true},
		{"net.ipv4.tcp_timestamps=1", true},
		{"tc.qdisc.root=other", false},
		{"tc.qdisc.root=drop", true},
		{"tc.qdisc.root=none", false},
	} {
		add(step.line)
		if got := q.dropping(); got != step.drop {
			t.Fatalf("after %q: dropping %v, want %v", step.line, got, step.drop)
		}
	}
	d := &queueDev{clk: nil, qdisc: q}
	add("tc.qdisc.root=drop")
	if !d.Congested() {
		t.Fatal("Congested: false while the qdisc drops")
	}
	if err := d.WritePacket([]byte{0x45}); err != nil || len(d.q) != 0 {
		t.Fatalf("WritePacket while dropping: err %v, %d queued, want nil 0", err, len(d.q))
	}
}
