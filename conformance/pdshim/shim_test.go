package pdshim

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"golang.org/x/sys/unix"
)

var (
	remote = netip.MustParseAddr("198.19.0.2")
	lport  = uint16(8080)
	rport  = uint16(40000)
)

// packet builds the IPv4 packet of a segment from the script's peer.
func packet(t *testing.T, seg tcp.Segment) []byte {
	t.Helper()
	seg.SrcPort, seg.DstPort = rport, lport
	b := make([]byte, 20+seg.EncodedLen())
	n, err := seg.Encode(b[20:])
	if err != nil {
		t.Fatal(err)
	}
	tcp.SetChecksum(remote, DefaultLocal, b[20:20+n])
	b = b[:20+n]
	b[0], b[8], b[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	s, d := remote.As4(), DefaultLocal.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	return b
}

// receive returns the stack's next segment and its send instant.
func receive(t *testing.T, s *Shim) (tcp.Segment, int64) {
	t.Helper()
	buf := make([]byte, 2000)
	n, at, err := s.NetdevReceive(buf)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := tcp.ParseSegment(buf[20:n])
	if err != nil {
		t.Fatal(err)
	}
	return seg, at
}

// accepted runs a passive open to the shim on lport and returns the shim, the
// listener's descriptor and the stack's ISN.
func accepted(t *testing.T, hooks Hooks) (*Shim, int, uint32) {
	t.Helper()
	s, fd := shimSocket(t, hooks)
	if err := s.Bind(fd, netip.AddrPortFrom(DefaultLocal, lport)); err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	syn := tcp.Segment{Seq: 0, Flags: tcp.FlagSYN, Window: 65535}
	syn.Options.HasMSS, syn.Options.MSS = true, 1000
	if err := s.NetdevSend(packet(t, syn)); err != nil {
		t.Fatal(err)
	}
	sa, _ := receive(t, s)
	if sa.Flags != tcp.FlagSYN|tcp.FlagACK || sa.Ack != 1 {
		t.Fatalf("got %v ack %d, want a SYN-ACK of 1", sa.Flags, sa.Ack)
	}
	return s, fd, uint32(sa.Seq)
}

// shimSocket returns a new shim with hooks and a TCP socket of it.
func shimSocket(t *testing.T, hooks Hooks) (*Shim, int) {
	t.Helper()
	s, err := New(Options{Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fd, err := s.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s, fd
}

func ack(iss uint32) tcp.Segment {
	return tcp.Segment{Seq: 1, Ack: seqnum.Value(iss + 1), Flags: tcp.FlagACK, Window: 65535}
}

func TestPassiveOpenInVirtualTime(t *testing.T) {
	s, fd, iss := accepted(t, Hooks{})
	t0 := s.Now()
	// On the main thread, an accept that would block fails at once.
	if _, _, err := s.Accept(fd); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("accept before the handshake: got %v, want EAGAIN", err)
	}
	s.Usleep(100000)
	if now := s.Now(); now < t0+100000 || now > t0+100010 {
		t.Fatalf("after usleep(100 ms): now %d, want %d (+ a few µs)", now, t0+100000)
	}
	if err := s.NetdevSend(packet(t, ack(iss))); err != nil {
		t.Fatal(err)
	}
	cfd, peer, err := s.Accept(fd)
	if err != nil || peer != netip.AddrPortFrom(remote, rport) {
		t.Fatalf("accept: %v %v", peer, err)
	}
	ti := make([]byte, 256)
	n, err := s.Getsockopt(cfd, unix.SOL_TCP, unix.TCP_INFO, ti)
	if err != nil || n != len(ti) {
		t.Fatalf("TCP_INFO: %d %v", n, err)
	}
	if st, cwnd := ti[tiState], binary.NativeEndian.Uint32(ti[tiSndCwnd:]); st != 1 || cwnd != 10 {
		t.Fatalf("TCP_INFO: state %d cwnd %d, want 1 (ESTABLISHED) 10", st, cwnd)
	}
	if err := s.Setsockopt(cfd, unix.SOL_TCP, unix.TCP_CONGESTION, []byte("cubic\x00\x00\x00")); !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("TCP_CONGESTION: got %v, want ENOSYS", err)
	}
	// The stack sends nothing more: NetdevReceive says so instead of waiting.
	if _, _, err := s.NetdevReceive(make([]byte, 2000)); !errors.Is(err, ErrNothingSent) {
		t.Fatalf("NetdevReceive with nothing to send: got %v", err)
	}
}

// TestBlockingReadWaitsForTheScript: a read on packetdrill's syscall thread
// waits, in virtual time, for the data the main thread injects, and reports
// the instant it completed at.
func TestBlockingReadWaitsForTheScript(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mainTID := unix.Gettid()
	done := make(chan int64, 1)
	s, fd, iss := accepted(t, Hooks{
		Main: func() bool { return unix.Gettid() == mainTID },
		Done: func(us int64) { done <- us },
	})
	if err := s.NetdevSend(packet(t, ack(iss))); err != nil {
		t.Fatal(err)
	}
	cfd, _, err := s.Accept(fd)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		runtime.LockOSThread()
		buf := make([]byte, 100)
		n, err := s.Recv(cfd, buf, len(buf), 0)
		if err != nil {
			n = -1
		}
		got <- n
	}()
	for !s.waiting() {
		time.Sleep(time.Millisecond)
	}
	s.Usleep(50000)
	at := s.Now()
	data := ack(iss)
	data.Payload = []byte("hello")
	if err := s.NetdevSend(packet(t, data)); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 5 {
		t.Fatalf("read: got %d, want 5", n)
	}
	if us := <-done; us != at {
		t.Fatalf("read completed at %d, want %d (the data's instant)", us, at)
	}
}

// TestNetdevReceiveWaitsForACallOnItsWay: packetdrill's main thread goes on
// once its syscall thread sleeps, which it can do in the Go runtime before
// its call reaches the shim. A NetdevReceive that finds nothing to send
// while no call is registered waits (CallGrace, real time) for one: here a
// blocking connect that comes 5 ms late, whose SYN it then returns.
func TestNetdevReceiveWaitsForACallOnItsWay(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mainTID := unix.Gettid()
	s, fd := shimSocket(t, Hooks{Main: func() bool { return unix.Gettid() == mainTID }})
	go func() {
		runtime.LockOSThread()
		time.Sleep(5 * time.Millisecond) // on its way into the shim
		s.Connect(fd, netip.MustParseAddrPort("198.18.0.2:8080"))
	}()
	syn, _ := receive(t, s)
	if syn.Flags != tcp.FlagSYN {
		t.Fatalf("got %v, want the connect's SYN", syn.Flags)
	}
}
