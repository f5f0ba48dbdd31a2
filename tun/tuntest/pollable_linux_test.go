//go:build linux

package tuntest_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// pollReadable reports whether fd polls readable within wait.
func pollReadable(t *testing.T, fd int, wait time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(wait/time.Millisecond))
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return n == 1 && fds[0].Revents&unix.POLLIN != 0
}

// TestPollableFake: the descriptor polls readable exactly while a packet
// waits, and ReadPacketNonblock says ErrWouldBlock when none does.
func TestPollableFake(t *testing.T) {
	f, err := tuntest.NewPollableFake(0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := f.ReadFD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, f.MTU())
	if _, err := f.ReadPacketNonblock(buf); !errors.Is(err, tun.ErrWouldBlock) {
		t.Fatalf("ReadPacketNonblock on an empty fake = %v, want ErrWouldBlock", err)
	}
	if pollReadable(t, fd, 0) {
		t.Fatal("empty fake polls readable")
	}
	for _, p := range []string{"one", "two"} {
		if err := f.Inject([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"one", "two"} {
		if !pollReadable(t, fd, time.Second) {
			t.Fatalf("not readable with %q waiting", want)
		}
		n, err := f.ReadPacketNonblock(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("ReadPacketNonblock = %q, %v; want %q", buf[:n], err, want)
		}
	}
	if pollReadable(t, fd, 0) {
		t.Fatal("drained fake polls readable")
	}
	if err := f.WritePacket([]byte("out")); err != nil {
		t.Fatal(err)
	}
	if w := f.Written(); len(w) != 1 || string(w[0]) != "out" {
		t.Errorf("Written() = %q, want [out]", w)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.ReadPacket(buf)
		done <- err
	}()
	f.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadPacket pending at Close = %v, want net.ErrClosed", err)
	}
	if _, err := f.ReadFD(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadFD after Close = %v, want net.ErrClosed", err)
	}
}
