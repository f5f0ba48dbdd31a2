//go:build linux

package segwatch

import (
	"testing"

	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestDevicePollable: a watched Pollable device is Pollable, with the
// wrapped device's descriptor, and the watcher sees what is read on that
// path. (Without it, a stack behind the watcher reads through a goroutine:
// the comparison measured a slower tcpwheel than `tcpwheel run` runs.)
func TestDevicePollable(t *testing.T) {
	fake, err := tuntest.NewPollableFake(0)
	if err != nil {
		t.Fatal(err)
	}
	w := New(Config{Local: stackAP.Addr()})
	defer w.Close()
	d := Wrap(fake, w)
	defer d.Close()
	p := fake.CheckWrapped(t, d)
	buf := make([]byte, p.MTU())
	if err := fake.Inject(packet(kernelAP, stackAP, tcpSeg{seq: 5, ack: 2, flags: syn | ack})); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadPacketNonblock(buf); err != nil {
		t.Fatal(err)
	}
	if err := p.WritePacket(packet(stackAP, kernelAP, tcpSeg{seq: 2, ack: 6, flags: ack})); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.EgressPackets != 1 || st.IngressPackets != 1 {
		t.Errorf("stats %+v: want one packet each way, the ingress one read on the Pollable path", st)
	}
}

// TestDeviceNotPollable: a watched device that cannot be polled says so, so
// that the stack keeps its reader goroutine.
func TestDeviceNotPollable(t *testing.T) {
	a, b := tuntest.Pipe(1500)
	defer b.Close()
	w := New(Config{Local: stackAP.Addr()})
	defer w.Close()
	d := Wrap(a, w)
	defer d.Close()
	tuntest.CheckNotPollable(t, d)
}
