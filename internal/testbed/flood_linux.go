//go:build linux

package testbed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Limits of a SYN flood: every flood is bounded in count and in time.
const (
	MaxFloodSYNs = 1_000_000
	MaxFloodRate = 1_000_000 // SYNs per second
	// floodSlack is how much longer than Count/Rate a flood may take (a
	// descheduled sender catching up) before it stops short.
	floodSlack = 5 * time.Second
)

// The spoofed sources: hosts spoofFirst..spoofLast of the kernel side's
// /24, each with spoofPorts source ports.
const (
	spoofFirst = 10
	spoofLast  = 250
	spoofHosts = spoofLast - spoofFirst + 1
	spoofPort0 = 1024
	spoofPorts = 65536 - spoofPort0
)

// benchNet is 198.18.0.0/15 (RFC 2544): no spoofed source is ever outside it.
func benchNet() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, 0}), 15) }

// SYNFloodConfig describes a flood of spoofed SYNs from the namespace's
// kernel side to the stack.
type SYNFloodConfig struct {
	Count int    // SYNs, 1 to MaxFloodSYNs
	Rate  int    // SYNs per second, 1 to MaxFloodRate
	Port  int    // the stack's port
	Seed  uint64 // of the SYNs' sequence numbers and timestamps
}

// SYNFloodResult is what a flood sent.
type SYNFloodResult struct {
	Sent    int           // SYNs handed to the kernel
	Errors  int           // sends the kernel refused (ENOBUFS, EAGAIN): not sent
	Elapsed time.Duration // from the first SYN to the last
}

// SpoofedSource is the source of the flood's SYN i: one of hosts .10 to .250
// of the kernel side's /24 (never the kernel's nor the stack's address, always
// inside 198.18.0.0/15), with a source port from 1024 up, so that every SYN of
// a flood is a connection of its own.
func (b *Bed) SpoofedSource(i int) netip.AddrPort {
	a := b.KernelAddr.As4()
	a[3] = byte(spoofFirst + i%spoofHosts)
	return netip.AddrPortFrom(netip.AddrFrom4(a), uint16(spoofPort0+(i/spoofHosts)%spoofPorts))
}

// SpoofedIndex is SpoofedSource's inverse: the index of the SYN that came
// from src, and false for an address the flood does not use.
func (b *Bed) SpoofedIndex(src netip.AddrPort) (int, bool) {
	a, k := src.Addr().As4(), b.KernelAddr.As4()
	if !src.Addr().Is4() || a[0] != k[0] || a[1] != k[1] || a[2] != k[2] || a[3] < spoofFirst || a[3] > spoofLast || src.Port() < spoofPort0 {
		return 0, false
	}
	return int(src.Port()-spoofPort0)*spoofHosts + int(a[3]-spoofFirst), true
}

// checkSpoofable checks that the flood's sources stay inside 198.18.0.0/15
// and inside the kernel side's prefix, away from the two real addresses.
func (b *Bed) checkSpoofable() error {
	peer := b.Att.Config().PeerAddr
	lo, hi := b.SpoofedSource(0).Addr(), b.SpoofedSource(spoofHosts-1).Addr()
	for _, a := range []netip.Addr{lo, hi} {
		if !benchNet().Contains(a) || !peer.Contains(a) {
			return fmt.Errorf("testbed: spoofed source %v outside %v or 198.18.0.0/15", a, peer)
		}
	}
	for _, real := range []netip.Addr{b.KernelAddr, b.StackAddr} {
		if lo.Compare(real) <= 0 && real.Compare(hi) <= 0 {
			return fmt.Errorf("testbed: spoofed sources %v-%v would include %v", lo, hi, real)
		}
	}
	return nil
}

// SYNFlood sends cfg.Count SYNs at cfg.Rate per second to the stack's port
// from spoofed sources (SpoofedSource), through a raw socket (IP_HDRINCL) of
// the namespace's kernel: they cross the real TUN as any peer's packets do,
// and queue with them. The stack's answers go back into the namespace, where
// the kernel, which forwards nothing, drops them: no RST ever comes back.
//
// It ends when every SYN is sent, ctx is done, or Count/Rate + 5 s have
// passed, whichever is first; sends the kernel refuses for want of buffer
// space are counted, not retried.
func (b *Bed) SYNFlood(ctx context.Context, cfg SYNFloodConfig) (SYNFloodResult, error) {
	var res SYNFloodResult
	switch {
	case cfg.Count < 1 || cfg.Count > MaxFloodSYNs:
		return res, fmt.Errorf("testbed: flood of %d SYNs: want 1 to %d", cfg.Count, MaxFloodSYNs)
	case cfg.Rate < 1 || cfg.Rate > MaxFloodRate:
		return res, fmt.Errorf("testbed: flood at %d SYNs/s: want 1 to %d", cfg.Rate, MaxFloodRate)
	case cfg.Port < 1 || cfg.Port > 65535:
		return res, fmt.Errorf("testbed: flood to port %d", cfg.Port)
	}
	if err := b.checkSpoofable(); err != nil {
		return res, err
	}
	fd := -1
	err := b.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_HDRINCL, 1)
	})
	if fd >= 0 {
		defer unix.Close(fd)
	}
	if err != nil {
		return res, fmt.Errorf("testbed: raw socket in the namespace: %w", err)
	}
	return b.flood(ctx, fd, cfg)
}

// flood paces the SYNs on fd: at each wake it sends those due by then.
func (b *Bed) flood(ctx context.Context, fd int, cfg SYNFloodConfig) (SYNFloodResult, error) {
	var res SYNFloodResult
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5f100d))
	dst := netip.AddrPortFrom(b.StackAddr, uint16(cfg.Port))
	to := &unix.SockaddrInet4{Addr: b.StackAddr.As4()}
	pkt := make([]byte, synPacketLen)
	perSYN := time.Second / time.Duration(cfg.Rate)
	limit := time.Duration(cfg.Count)*perSYN + floodSlack
	start := time.Now()
	for res.Sent+res.Errors < cfg.Count {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		elapsed := time.Since(start)
		if elapsed > limit {
			return res, fmt.Errorf("testbed: flood took over %v; stopped after %d SYNs", limit, res.Sent)
		}
		due := min(cfg.Count, int(elapsed.Seconds()*float64(cfg.Rate))+1)
		for i := res.Sent + res.Errors; i < due; i++ {
			encodeSYN(pkt, b.SpoofedSource(i), dst, rng.Uint32(), rng.Uint32())
			err := unix.Sendto(fd, pkt, 0, to)
			switch {
			case err == nil:
				res.Sent++
			case errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.EAGAIN):
				res.Errors++
			default:
				return res, fmt.Errorf("testbed: flood: sendto: %w", err)
			}
		}
		res.Elapsed = time.Since(start)
		if next := start.Add(time.Duration(res.Sent+res.Errors) * time.Second / time.Duration(cfg.Rate)); res.Sent+res.Errors < cfg.Count {
			time.Sleep(time.Until(next))
		}
	}
	return res, nil
}

// A spoofed SYN: IPv4 (20 bytes) and TCP (20) with Linux's options (20):
// MSS 1460, SACK permitted, timestamps, NOP, window scale 7.
const synPacketLen = 20 + 20 + 20

// encodeSYN writes a SYN from src to dst into pkt (synPacketLen bytes). The
// kernel fills in the IP header's checksum and ID (raw(7)).
func encodeSYN(pkt []byte, src, dst netip.AddrPort, iss, tsval uint32) {
	clear(pkt)
	ip, t := pkt[:20], pkt[20:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], synPacketLen)
	ip[6] = 0x40 // DF
	ip[8] = 64   // TTL
	ip[9] = unix.IPPROTO_TCP
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(t[0:], src.Port())
	binary.BigEndian.PutUint16(t[2:], dst.Port())
	binary.BigEndian.PutUint32(t[4:], iss)
	t[12] = 10 << 4 // 40 bytes of TCP header
	t[13] = 0x02    // SYN
	binary.BigEndian.PutUint16(t[14:], 64240)
	opts := t[20:]
	copy(opts, []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10})
	binary.BigEndian.PutUint32(opts[8:], tsval)
	copy(opts[16:], []byte{1, 3, 3, 7})
	binary.BigEndian.PutUint16(t[16:], tcpChecksum(s, d, t))
}

// tcpChecksum is the TCP checksum of segment t (its checksum field zero)
// with the IPv4 pseudo-header (RFC 9293 3.1).
func tcpChecksum(src, dst [4]byte, t []byte) uint16 {
	sum := uint32(unix.IPPROTO_TCP) + uint32(len(t))
	for _, a := range [][4]byte{src, dst} {
		sum += (uint32(a[0])<<8 | uint32(a[1])) + (uint32(a[2])<<8 | uint32(a[3]))
	}
	for i := 0; i+1 < len(t); i += 2 {
		sum += uint32(t[i])<<8 | uint32(t[i+1])
	}
	if len(t)%2 == 1 {
		sum += uint32(t[len(t)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
