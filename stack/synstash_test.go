package stack

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/tun"
)

// queueDevice is the direct path's side of a device for a manual stack's
// readReady: it hands out the packets queued, then tun.ErrWouldBlock, as a
// drained TUN does.
type queueDevice struct{ q [][]byte }

func (d *queueDevice) ReadFD() (int, error)           { return -1, errors.New("queueDevice: no descriptor") }
func (d *queueDevice) ReadPacket([]byte) (int, error) { return 0, tun.ErrWouldBlock }
func (d *queueDevice) WritePacket([]byte) error       { return errors.New("queueDevice: read only") }
func (d *queueDevice) MTU() int                       { return 1500 }
func (d *queueDevice) Name() string                   { return "queue" }
func (d *queueDevice) Close() error                   { return nil }
func (d *queueDevice) ReadPacketNonblock(buf []byte) (int, error) {
	if len(d.q) == 0 {
		return 0, tun.ErrWouldBlock
	}
	n := copy(buf, d.q[0])
	d.q = d.q[1:]
	return n, nil
}

// stashBed is a manual stack with a SYN stash of size slots, listening on
// port 80, whose readReady reads dev (the test calls it: a manual loop runs
// what it posts at once, under its lock, so a posted share of the stash runs
// inside it, and a drain may leave at most two batches stashed: a third
// would be posted from the posted one).
type stashBed struct {
	m    *Manual
	link link
	dev  *queueDevice
}

func newStashBed(t *testing.T, size int) *stashBed {
	t.Helper()
	m, l := manualOn(t, Config{Addr: addrB, SYNStash: size})
	if _, err := m.Listen("tcp", ":80"); err != nil {
		t.Fatal(err)
	}
	dev := &queueDevice{}
	m.poll, m.ibuf = dev, make([]byte, 1500)
	t.Cleanup(func() { m.poll = nil })
	return &stashBed{m: m, link: l, dev: dev}
}

// tcpPacket is a segment from addrA:port to addrB:80.
func tcpPacket(t *testing.T, port uint16, seq, ack uint32, flags tcp.Flags, payload string) []byte {
	t.Helper()
	seg := tcp.Segment{SrcPort: port, DstPort: 80, Seq: seqnum.Value(seq), Ack: seqnum.Value(ack), Flags: flags, Window: 65535, Payload: []byte(payload)}
	b := make([]byte, seg.EncodedLen())
	if _, err := seg.Encode(b); err != nil {
		t.Fatal(err)
	}
	tcp.SetChecksum(addrA, addrB, b)
	return ipv4Packet(addrA, addrB, protoTCP, b)
}

// out is what the stack sent since the last call: each packet's segment,
// as "SA:port" (a SYN-ACK to port), "A:port" (an ACK) or flags:port.
func (b *stashBed) out(t *testing.T) (segs []tcp.Segment, desc []string) {
	t.Helper()
	for _, p := range b.link.readAll(t) {
		seg, err := tcp.ParseSegment(p[ipv4HeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, seg)
		kind := "?"
		switch seg.Flags &^ tcp.FlagPSH {
		case tcp.FlagSYN | tcp.FlagACK:
			kind = "SA"
		case tcp.FlagACK:
			kind = "A"
		}
		desc = append(desc, kind+":"+netip.AddrPortFrom(addrA, seg.DstPort).String())
	}
	return segs, desc
}

// established opens a connection from port, its data not yet sent: it
// returns the client's next sequence number and the stack's.
func (b *stashBed) established(t *testing.T, port uint16) (seq, ack uint32) {
	t.Helper()
	b.dev.q = append(b.dev.q, tcpPacket(t, port, 1000, 0, tcp.FlagSYN, ""))
	b.m.readReady()
	segs, desc := b.out(t)
	if len(segs) != 1 || desc[0] != "SA:"+netip.AddrPortFrom(addrA, port).String() {
		t.Fatalf("answer to the first SYN: %v, want one SYN-ACK", desc)
	}
	ack = uint32(segs[0].Seq) + 1
	b.dev.q = append(b.dev.q, tcpPacket(t, port, 1001, ack, tcp.FlagACK, ""))
	b.m.readReady()
	return 1001, ack
}

// TestSYNStashServesDataFirst: a full batch of new connections' SYNs, then
// an established connection's data: the data is ACKed before any of the
// stashed SYNs is answered, and then every SYN is, oldest first, the
// counters exact. The batch of SYNs read alone answers none of them.
func TestSYNStashServesDataFirst(t *testing.T) {
	b := newStashBed(t, 1024)
	seq, ack := b.established(t, 5000)
	if st := b.m.Stats(); st.Input.SYNsStashed != 1 || st.Listen.SYNsIn != 1 {
		t.Fatalf("the first SYN: stashed %d, listener's SYNsIn %d: want 1, 1 (stashed, handled when drained)", st.Input.SYNsStashed, st.Listen.SYNsIn)
	}
	const n = maxReadBatch + 10
	for i := range n {
		b.dev.q = append(b.dev.q, tcpPacket(t, uint16(6000+i), 7, 0, tcp.FlagSYN, ""))
	}
	b.dev.q = append(b.dev.q, tcpPacket(t, 5000, seq, ack, tcp.FlagACK|tcp.FlagPSH, "hello"))
	if more := b.m.readReady(); !more {
		t.Fatal("a full batch: readReady reports no more")
	}
	if _, desc := b.out(t); len(desc) != 0 {
		t.Fatalf("after a full batch of SYNs the stack sent %v, want nothing (stashed)", desc)
	}
	if st := b.m.Stats(); st.Input.SYNsStashed != 1+maxReadBatch || st.Input.SYNStashMax != maxReadBatch {
		t.Fatalf("stashed %d, most at once %d: want %d, %d", st.Input.SYNsStashed, st.Input.SYNStashMax, 1+maxReadBatch, maxReadBatch)
	}
	if more := b.m.readReady(); more {
		t.Fatal("a drained device: readReady reports more")
	}
	segs, desc := b.out(t)
	if len(desc) != 1+n {
		t.Fatalf("sent %d segments, want the data's ACK and %d SYN-ACKs: %v", len(desc), n, desc)
	}
	if desc[0] != "A:198.18.0.1:5000" || uint32(segs[0].Ack) != seq+5 {
		t.Fatalf("first out: %v (ack %d), want the ACK of the data (ack %d), before the stashed SYNs' SYN-ACKs", desc[0], segs[0].Ack, seq+5)
	}
	for i, d := range desc[1:] {
		if want := "SA:" + netip.AddrPortFrom(addrA, uint16(6000+i)).String(); d != want {
			t.Fatalf("out[%d] = %s, want %s: every SYN answered, oldest first", i+1, d, want)
		}
	}
	st := b.m.Stats()
	in := st.Input
	if in.SYNsStashed != 1+n || in.SYNsEarly != 0 || in.SYNsAged != 0 || st.Listen.SYNsIn != 1+n || st.TCP.SYNRetransmits != 0 {
		t.Fatalf("stashed %d, early %d, aged %d, listener's SYNsIn %d, SYN-ACKs resent %d: want %d, 0, 0, %d, 0",
			in.SYNsStashed, in.SYNsEarly, in.SYNsAged, st.Listen.SYNsIn, st.TCP.SYNRetransmits, 1+n, 1+n)
	}
	if b.m.syns.n != 0 || b.m.syns.posted {
		t.Fatalf("stash left %d SYNs, posted %v: want none", b.m.syns.n, b.m.syns.posted)
	}
}

// TestSYNStashFull: a stash of 8 under a full batch of 64 SYNs hands its
// oldest to the listener as each new one comes (as without a stash), keeps
// the last 8 until the device drains, and answers all in order.
func TestSYNStashFull(t *testing.T) {
	const size = 8
	b := newStashBed(t, size)
	for i := range maxReadBatch + 1 {
		b.dev.q = append(b.dev.q, tcpPacket(t, uint16(6000+i), 7, 0, tcp.FlagSYN, ""))
	}
	b.m.readReady()
	_, desc := b.out(t)
	if len(desc) != maxReadBatch-size {
		t.Fatalf("during a full batch: %d SYN-ACKs, want %d (the stash's oldest, at once)", len(desc), maxReadBatch-size)
	}
	if in := b.m.Stats().Input; in.SYNsEarly != maxReadBatch-size || in.SYNsStashed != maxReadBatch || in.SYNStashMax != size {
		t.Fatalf("early %d, stashed %d, most at once %d: want %d, %d, %d", in.SYNsEarly, in.SYNsStashed, in.SYNStashMax, maxReadBatch-size, maxReadBatch, size)
	}
	b.m.readReady()
	_, more := b.out(t)
	desc = append(desc, more...)
	if len(desc) != maxReadBatch+1 {
		t.Fatalf("%d SYN-ACKs in all, want %d", len(desc), maxReadBatch+1)
	}
	for i, d := range desc {
		if want := "SA:" + netip.AddrPortFrom(addrA, uint16(6000+i)).String(); d != want {
			t.Fatalf("out[%d] = %s, want %s", i, d, want)
		}
	}
}

// TestSYNStashRetransmittedSYN: a SYN for a half-open connection (a
// retransmission) is handled at once, even in a full batch, as is the
// established connection's segment: only new connections wait.
func TestSYNStashRetransmittedSYN(t *testing.T) {
	b := newStashBed(t, 1024)
	b.dev.q = append(b.dev.q, tcpPacket(t, 5000, 1000, 0, tcp.FlagSYN, ""))
	b.m.readReady() // drained: answered
	if _, desc := b.out(t); len(desc) != 1 {
		t.Fatalf("first SYN: %v, want a SYN-ACK", desc)
	}
	b.dev.q = append(b.dev.q, tcpPacket(t, 5000, 1000, 0, tcp.FlagSYN, "")) // resent
	for i := range maxReadBatch - 1 {
		b.dev.q = append(b.dev.q, tcpPacket(t, uint16(6000+i), 7, 0, tcp.FlagSYN, ""))
	}
	b.dev.q = append(b.dev.q, tcpPacket(t, 7000, 7, 0, tcp.FlagSYN, "")) // the next batch
	if !b.m.readReady() {
		t.Fatal("a full batch: readReady reports no more")
	}
	_, desc := b.out(t)
	if len(desc) != 1 || desc[0] != "SA:198.18.0.1:5000" {
		t.Fatalf("a full batch with a resent SYN: sent %v, want its SYN-ACK again, at once", desc)
	}
	if in := b.m.Stats().Input; in.SYNsStashed != 1+maxReadBatch-1 {
		t.Fatalf("stashed %d, want %d: the resent SYN is not", in.SYNsStashed, maxReadBatch)
	}
	b.m.readReady()
	if _, desc := b.out(t); len(desc) != maxReadBatch {
		t.Fatalf("drained: %d SYN-ACKs, want %d", len(desc), maxReadBatch)
	}
}

// TestSYNStashConfig: SYNStash out of range, or with Record, is ErrConfig.
func TestSYNStashConfig(t *testing.T) {
	for _, cfg := range []Config{
		{SYNStash: -1},
		{SYNStash: MaxSYNStash + 1},
		{SYNStash: 16, Record: &discardWriter{}},
	} {
		cfg.Device, cfg.Addr = &queueDevice{}, addrB
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("SYNStash %d, Record %v: %v, want ErrConfig", cfg.SYNStash, cfg.Record != nil, err)
		}
	}
}

// discardWriter is a Record that keeps nothing.
type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// TestSYNStashAged: SYNs stashed synStashWait ago are handled after a full
// batch even though the device has not drained, oldest first, at most a
// batch of them; younger ones wait on.
func TestSYNStashAged(t *testing.T) {
	b := newStashBed(t, 1024)
	// syns queues n SYNs from ports first on, and one more, left in the
	// device by the batch: it does not drain.
	syns := func(first, n int) {
		for i := range n {
			b.dev.q = append(b.dev.q, tcpPacket(t, uint16(first+i), 7, 0, tcp.FlagSYN, ""))
		}
	}
	syns(6000, maxReadBatch+1)
	b.m.readReady() // 6000-6063 stashed at 0
	if err := b.m.AdvanceTo(synStashWait - time.Millisecond); err != nil {
		t.Fatal(err)
	}
	syns(7000, maxReadBatch)
	b.m.readReady() // 6064, 7000-7062: none has waited synStashWait
	if _, desc := b.out(t); len(desc) != 0 {
		t.Fatalf("%v after the first SYNs: sent %v, want nothing", synStashWait-time.Millisecond, desc)
	}
	if err := b.m.AdvanceTo(synStashWait); err != nil {
		t.Fatal(err)
	}
	syns(8000, maxReadBatch)
	if !b.m.readReady() {
		t.Fatal("a full batch: readReady reports no more")
	}
	_, desc := b.out(t)
	if len(desc) != maxReadBatch {
		t.Fatalf("after a full batch at synStashWait: %d SYN-ACKs, want the %d stashed at 0", len(desc), maxReadBatch)
	}
	for i, d := range desc {
		if want := "SA:" + netip.AddrPortFrom(addrA, uint16(6000+i)).String(); d != want {
			t.Fatalf("out[%d] = %s, want %s", i, d, want)
		}
	}
	if in := b.m.Stats().Input; in.SYNsAged != maxReadBatch || in.SYNsStashed != 3*maxReadBatch {
		t.Fatalf("aged %d, stashed %d: want %d, %d", in.SYNsAged, in.SYNsStashed, maxReadBatch, 3*maxReadBatch)
	}
}
