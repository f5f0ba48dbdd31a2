package stack

import (
	"io"
	"net"
	"testing"
)

// BenchmarkConnTransfer moves 8 MB between two stacks over the in-memory
// link, both on real loops: Writes of 32 KB, Reads of 8 KB (io.Copy into
// io.Discard).
func BenchmarkConnTransfer(b *testing.B) {
	a, s := pair(b, Config{})
	client, server := dialPair(b, a, s)
	benchTransfer(b, client, server)
}

// BenchmarkConnTransfer6 is BenchmarkConnTransfer over IPv6 (MSS 1440, not
// 1460: 1.4% more segments for the same bytes).
func BenchmarkConnTransfer6(b *testing.B) {
	a, s := pairWith(b, Config{}, addr6A, addr6B)
	client, server := dialPairTo(b, a, s, "tcp6", "[2001:db8::2]:7")
	benchTransfer(b, client, server)
}

// benchTransfer moves 8 MB from client to server per op.
func benchTransfer(b *testing.B, client, server net.Conn) {
	const size = 8 << 20
	defer client.Close()
	defer server.Close()
	go io.Copy(io.Discard, server)
	buf := make([]byte, 32<<10)
	b.SetBytes(size)
	for b.Loop() {
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := client.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkConnPingPong is a request of 100 bytes and a response of 1000,
// one at a time on one connection (a keep-alive HTTP client's pattern).
func BenchmarkConnPingPong(b *testing.B) {
	a, s := pair(b, Config{})
	client, server := dialPair(b, a, s)
	defer client.Close()
	defer server.Close()
	go func() {
		req, resp := make([]byte, 100), make([]byte, 1000)
		for {
			if _, err := io.ReadFull(server, req); err != nil {
				return
			}
			if _, err := server.Write(resp); err != nil {
				return
			}
		}
	}()
	req, resp := make([]byte, 100), make([]byte, 1000)
	for b.Loop() {
		if _, err := client.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, resp); err != nil {
			b.Fatal(err)
		}
	}
}
