//go:build linux

package pcaptap_test

import (
	"bytes"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun/pcaptap"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestPollable: a tap on a Pollable device is Pollable, with the wrapped
// device's descriptor, and what it reads on that path is recorded as on
// ReadPacket's.
func TestPollable(t *testing.T) {
	fake, err := tuntest.NewPollableFake(0)
	if err != nil {
		t.Fatal(err)
	}
	var capture bytes.Buffer
	tap := mustWrap(t, fake, &capture, pcaptap.Config{})
	p := fake.CheckWrapped(t, tap)
	buf := make([]byte, p.MTU())
	pkt := tcpPacket(peerAddr, stackAddr, header.TCPFlagAck, 1, 100)
	if err := fake.Inject(pkt); err != nil {
		t.Fatal(err)
	}
	n, err := p.ReadPacketNonblock(buf)
	if err != nil || !bytes.Equal(buf[:n], pkt) {
		t.Fatalf("ReadPacketNonblock = %d bytes, %v; want the injected %d", n, err, len(pkt))
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	if st := tap.Stats(); st.Packets != 1 || st.Bytes != uint64(len(pkt)) {
		t.Errorf("Stats %+v after one non-blocking read, want 1 packet of %d bytes", st, len(pkt))
	}
	_, recs := readCapture(t, &capture)
	if len(recs) != 1 || !bytes.Equal(recs[0].data, pkt) {
		t.Errorf("capture holds %d records, want the one packet read on the Pollable path", len(recs))
	}
}

// TestNotPollable: a tap on a device that cannot be polled says so, so that
// the stack keeps its reader goroutine.
func TestNotPollable(t *testing.T) {
	a, b := tuntest.Pipe(0)
	defer b.Close()
	tap := mustWrap(t, a, &bytes.Buffer{}, pcaptap.Config{})
	defer tap.Close()
	tuntest.CheckNotPollable(t, tap)
}
