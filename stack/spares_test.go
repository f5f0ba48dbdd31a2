package stack

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// TestClosedConnAfterRecycle: a Conn whose endpoint went back to the
// stack's spares (the application closed it; it reached CLOSED, or handed
// its TIME-WAIT to a record) answers every call as a closed connection
// does, and none of those calls reaches the connection that took its
// endpoint next: that one keeps its own settings and moves its data both
// ways.
func TestClosedConnAfterRecycle(t *testing.T) {
	for _, how := range []string{"server closes first", "client closes first", "reset: unread data", "reset by the peer, then Close"} {
		t.Run(how, func(t *testing.T) {
			p := newManualPairWith(t, tcp.Config{TimeWait: 10 * time.Second})
			ln, err := p.b.Listen("tcp", ":7")
			if err != nil {
				t.Fatal(err)
			}
			l := ln.(*Listener)
			client, server := p.open(l)
			p.send(client, []byte("request"))
			if how != "reset: unread data" && how != "reset by the peer, then Close" {
				if got := p.readAll(server, make([]byte, 64), nil); string(got) != "request" {
					t.Fatalf("server read %q", got)
				}
			}
			p.send(server, []byte("reply"))
			old := server.ep
			switch how {
			case "client closes first": // with nothing unread: a FIN, not a reset
				if got := p.readAll(client, make([]byte, 64), nil); string(got) != "reply" {
					t.Fatalf("client read %q", got)
				}
				client.Close()
				p.shuttle()
				server.Close()
				p.shuttle()
			case "reset by the peer, then Close": // the client's unread reply makes its Close a reset
				client.Close()
				p.shuttle()
				if st := server.ep.State(); st != tcp.StateClosed {
					t.Fatalf("after the peer's reset: %v", st)
				}
				server.Close()
				p.shuttle()
			default: // the server first: TIME-WAIT in a record, or a reset
				server.Close()
				p.shuttle()
				client.Close()
				p.shuttle()
			}
			// Recycled at the end of the batch that closed it; or, closed
			// by Close's part on the loop, retired until the next packet.
			b := p.b.Stack
			recycled := server.ep == nil && b.epSpares.Len() == 1
			retired := len(b.retired) == 1 && b.retired[0] == server && server.ep == old
			if !recycled && !retired {
				t.Fatalf("after the close: endpoint %p, %d spare endpoints, %d retired; want it recycled or retired", server.ep, b.epSpares.Len(), len(b.retired))
			}
			client2, server2 := p.open(l)
			if server.ep != nil || server2.ep != old || len(b.retired) != 0 {
				t.Fatalf("the next connection did not take the spare endpoint (the closed Conn's %p, %d retired)", server.ep, len(b.retired))
			}
			closedErr := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s on the closed Conn: no error", what)
				}
			}
			closedErr("SetNoDelay", server.SetNoDelay(false))
			closedErr("SetKeepAlive", server.SetKeepAlive(true))
			closedErr("SetKeepAlivePeriod", server.SetKeepAlivePeriod(time.Second))
			closedErr("SetKeepAliveConfig", server.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Second}))
			closedErr("SetUserTimeout", server.SetUserTimeout(time.Second))
			closedErr("SetSendBuffer", server.SetSendBuffer(1<<20))
			_, err = server.Write([]byte("x"))
			closedErr("Write", err)
			_, err = server.Read(make([]byte, 8))
			closedErr("Read", err)
			closedErr("Close", server.Close())
			closedErr("CloseWrite", server.CloseWrite())
			server.Abort()
			if err := server.SetDeadline(time.Now().Add(time.Hour)); err != nil {
				t.Fatalf("SetDeadline: %v", err)
			}
			if i := server.Info(); i.State != tcp.StateClosed || i.SegsOut != 0 {
				t.Fatalf("Info of the closed Conn: %v, %d segments out; want CLOSED and nothing else", i.State, i.SegsOut)
			}
			if r, err := server.Readiness(); err != nil || r.State != tcp.StateClosed {
				t.Fatalf("Readiness of the closed Conn: %+v, %v", r, err)
			}
			if lost, retrans := server.LossCounts(); lost != 0 || retrans != 0 {
				t.Fatalf("LossCounts of the closed Conn: %d %d", lost, retrans)
			}
			if server.LocalAddr().String() != "198.18.0.2:7" {
				t.Fatalf("LocalAddr %v", server.LocalAddr())
			}
			p.shuttle()

			if i := server2.Info(); i.State != tcp.StateEstablished || i.KeepAlive {
				t.Fatalf("the next connection: %v, keepalive %v; want ESTABLISHED without (the closed Conn's calls reached it)", i.State, i.KeepAlive)
			}
			up, down := bytes.Repeat([]byte("u"), 3000), bytes.Repeat([]byte("d"), 5000)
			p.send(client2, up)
			if got := p.readAll(server2, make([]byte, 1024), nil); !bytes.Equal(got, up) {
				t.Fatalf("the next connection's server read %d bytes, want %d", len(got), len(up))
			}
			p.send(server2, down)
			if got := p.readAll(client2, make([]byte, 1024), nil); !bytes.Equal(got, down) {
				t.Fatalf("the next connection's client read %d bytes, want %d", len(got), len(down))
			}
		})
	}
}
