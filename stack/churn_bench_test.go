package stack

import (
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// BenchmarkAcceptChurn is one connection's life on two manual stacks, as ab's
// churn (issue 15) and the burst (issue 11) make them: b listens, a dials,
// b accepts, reads a's request and answers, closes first (b keeps TIME-WAIT,
// as an HTTP/1.0 server), a closes. Both stacks' costs are in the figures;
// what a connection costs b's loop is most of it. Every 1000 connections
// the clocks move past TIME-WAIT so that the tables do not grow.
func BenchmarkAcceptChurn(b *testing.B) {
	p := newManualPairWith(b, tcp.Config{})
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		b.Fatal(err)
	}
	l := ln.(*Listener)
	req, resp, buf := make([]byte, 100), make([]byte, 1000), make([]byte, 2048)
	var now time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		client, server := p.open(l)
		p.send(client, req)
		if m, err := server.TryRead(buf); m != len(req) || err != nil {
			b.Fatalf("TryRead: %d, %v", m, err)
		}
		p.send(server, resp)
		server.Close()
		p.shuttle()
		client.Close()
		p.shuttle()
		if n++; n%1000 == 0 {
			now += 2 * time.Minute
			if err := p.a.AdvanceTo(now); err != nil {
				b.Fatal(err)
			}
			if err := p.b.AdvanceTo(now); err != nil {
				b.Fatal(err)
			}
			p.shuttle()
		}
	}
}
