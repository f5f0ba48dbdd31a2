//go:build linux

package netns

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun"
)

// TestReadPacketNonblock checks the Pollable side of a TUN: with nothing
// waiting the read returns tun.ErrWouldBlock at once, the descriptor polls
// readable once the kernel answers a ping, and the reply is then read
// without blocking.
func TestReadPacketNonblock(t *testing.T) {
	requireRoot(t)
	a := mustAttach(t, testConfig(t))
	fd, err := a.Dev.ReadFD()
	if err != nil || fd < 0 {
		t.Fatalf("ReadFD() = %d, %v", fd, err)
	}
	buf := make([]byte, a.Dev.MTU())
	// Drain whatever the link's configuration produced (IPv6 is off, but be safe).
	for {
		if _, err := a.Dev.ReadPacketNonblock(buf); err != nil {
			if !errors.Is(err, tun.ErrWouldBlock) {
				t.Fatalf("ReadPacketNonblock on an idle device: %v, want tun.ErrWouldBlock", err)
			}
			break
		}
	}
	const seq = 11
	if err := a.Dev.WritePacket(echoRequest(seq, []byte("nonblock"))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 100); err != nil && err != unix.EINTR {
			t.Fatalf("poll: %v", err)
		}
		for {
			n, err := a.Dev.ReadPacketNonblock(buf)
			if errors.Is(err, tun.ErrWouldBlock) {
				break
			}
			if err != nil {
				t.Fatalf("ReadPacketNonblock: %v", err)
			}
			p := buf[:n]
			if len(p) >= 28 && p[9] == unix.IPPROTO_ICMP && p[20] == 0 && binary.BigEndian.Uint16(p[26:28]) == seq {
				if err := checkIPv4(p, kernelAddr, userAddr, unix.IPPROTO_ICMP); err != nil {
					t.Fatalf("echo reply: %v", err)
				}
				return
			}
		}
	}
	t.Fatal("no echo reply read without blocking")
}

// TestReadPastDeadline: a ReadPacket past the read deadline fails with
// os.ErrDeadlineExceeded even while a packet waits, and leaves it to be
// read, as before the device's first blocking wait (tun's readPlain) as
// after it.
func TestReadPastDeadline(t *testing.T) {
	requireRoot(t)
	a := mustAttach(t, testConfig(t))
	fd, err := a.Dev.ReadFD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, a.Dev.MTU())
	for seq := uint16(21); seq < 23; seq++ { // the first read, then one after a wait
		if err := a.Dev.WritePacket(echoRequest(seq, []byte("deadline"))); err != nil {
			t.Fatal(err)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, 2000); err != unix.EINTR {
				break
			}
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			t.Fatal("no reply queued 2s after a ping")
		}
		a.Dev.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := a.Dev.ReadPacket(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("ping %d: ReadPacket past the deadline with a packet queued = %v, want os.ErrDeadlineExceeded", seq, err)
		}
		if !tun.PollReadable(fd) {
			t.Errorf("ping %d: the failed read took the packet", seq)
		}
		a.Dev.SetReadDeadline(time.Time{})
		for tun.PollReadable(fd) { // the reply (and anything else queued)
			if _, err := a.Dev.ReadPacket(buf); err != nil {
				t.Fatalf("ping %d: ReadPacket without a deadline = %v", seq, err)
			}
		}
		// A read that waits, until the deadline: the next ReadPacket is
		// after the device's first blocking wait.
		a.Dev.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		done := make(chan error, 1)
		go func() {
			_, err := a.Dev.ReadPacket(make([]byte, a.Dev.MTU()))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("ping %d: ReadPacket of a quiet device = %v, want os.ErrDeadlineExceeded", seq, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("ping %d: ReadPacket of a quiet device still waits 2s after its deadline", seq)
		}
		a.Dev.SetReadDeadline(time.Time{})
	}
}
