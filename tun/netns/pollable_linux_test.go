//go:build linux

package netns

import (
	"encoding/binary"
	"errors"
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
