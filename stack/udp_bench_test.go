package stack

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// udpBenchEcho serves UDP echo on s's port 7 until the socket closes (at
// the benchmark's end).
func udpBenchEcho(b *testing.B, s *Stack) {
	b.Helper()
	srv, err := s.ListenUDP("udp", ":7")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}

// udpBenchClient is a socket of a connected to b's echo on port 7.
func udpBenchClient(b *testing.B) net.Conn {
	b.Helper()
	a, s := pair(b, Config{})
	udpBenchEcho(b, s)
	c, err := a.DialUDP("udp", "198.18.0.2:7")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkUDPEchoPingPong: datagrams of 1000 bytes echoed one at a time
// between two stacks over the in-memory link (a round trip per op).
func BenchmarkUDPEchoPingPong(b *testing.B) {
	c := udpBenchClient(b)
	out, in := make([]byte, 1000), make([]byte, 2048)
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(out); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUDPEchoWindow: datagrams of 1000 bytes echoed with up to 64 in
// flight (compare's udp-echo burst), one op per datagram echoed. A datagram
// lost (none should be: 64 fit every queue) fails the benchmark.
func BenchmarkUDPEchoWindow(b *testing.B) {
	benchEchoWindow(b, udpBenchClient(b))
}

// benchEchoWindow sends b.N datagrams of 1000 bytes on c, up to 64 ahead
// of their echoes, and waits for every echo.
func benchEchoWindow(b *testing.B, c net.Conn) {
	const window = 64
	credit := make(chan struct{}, window)
	echoed := make(chan error, 1)
	n := b.N
	go func() {
		in := make([]byte, 2048)
		for range n {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(in); err != nil {
				echoed <- err
				return
			}
			credit <- struct{}{}
		}
		echoed <- nil
	}()
	out := make([]byte, 1000)
	b.SetBytes(int64(len(out)))
	b.ResetTimer()
	for i := range n {
		if i >= window {
			<-credit
		}
		binary.BigEndian.PutUint64(out, uint64(i))
		if _, err := c.Write(out); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-echoed; err != nil {
		b.Fatalf("echoes: %v", err)
	}
}
