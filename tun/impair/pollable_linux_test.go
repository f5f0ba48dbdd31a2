//go:build linux

package impair_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestPollable: impair on a Pollable device is Pollable, with the wrapped
// device's descriptor, and its rules drop on that path as on ReadPacket's.
func TestPollable(t *testing.T) {
	fake, err := tuntest.NewPollableFake(0)
	if err != nil {
		t.Fatal(err)
	}
	d := mustWrap(t, fake, impair.Config{})
	defer d.Close()
	p := fake.CheckWrapped(t, d)
	if _, err := d.DropNext(impair.Ingress, impair.MatchFIN, 1); err != nil {
		t.Fatal(err)
	}
	fin := tcpPacket(header.TCPFlagFin|header.TCPFlagAck, 0, 1)
	data := tcpPacket(header.TCPFlagAck, 10, 2)
	for _, pkt := range [][]byte{fin, data} {
		if err := fake.Inject(pkt); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, p.MTU())
	n, err := p.ReadPacketNonblock(buf)
	if err != nil || !bytes.Equal(buf[:n], data) {
		t.Fatalf("ReadPacketNonblock = %d bytes, %v; want the data packet (the FIN dropped by the rule)", n, err)
	}
	if n, err := p.ReadPacketNonblock(buf); !errors.Is(err, tun.ErrWouldBlock) {
		t.Fatalf("ReadPacketNonblock with nothing waiting = %d, %v; want ErrWouldBlock", n, err)
	}
	if st := d.Stats(); st.IngressDropped != 1 || st.IngressPassed != 1 {
		t.Errorf("ingress dropped %d, passed %d; want 1, 1", st.IngressDropped, st.IngressPassed)
	}
}
