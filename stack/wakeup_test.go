package stack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// TestWakeupsNotLost: a Read or Write that decides to wait (under mu: the
// buffer empty or full, its channel made) races with the loop's fill or
// sync of the buffer and its wake (wakeOn, which takes no lock): every
// such call is woken. Fresh connections each race a first wait (the
// channel made, its bit of made set) with the first data; a ping-pong of
// one byte each way races every Read's wait with the next byte; a bulk
// upload through a small send buffer races the Write's waits with the
// ACKs that free room. A lost wakeup leaves a call waiting with what it
// waits for there: its deadline (a hang's bound, not a measure) fails the
// test.
func TestWakeupsNotLost(t *testing.T) {
	const hang = 10 * time.Second
	lost := func(t *testing.T, what string, err error) {
		t.Helper()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: still waiting after %v: a lost wakeup", what, hang)
		}
		t.Fatalf("%s: %v", what, err)
	}
	t.Run("first waits", func(t *testing.T) {
		a, b := pair(t, Config{})
		ln, err := b.Listen("tcp", ":7")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		for range 300 {
			client, err := a.DialContext(context.Background(), "tcp", "198.18.0.2:7")
			if err != nil {
				t.Fatal(err)
			}
			server, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				server.SetReadDeadline(time.Now().Add(hang))
				_, err := server.Read(make([]byte, 1))
				got <- err
			}()
			if _, err := client.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				lost(t, "the first Read", err)
			}
			client.Close()
			server.Close()
		}
	})
	t.Run("ping-pong", func(t *testing.T) {
		a, b := pair(t, Config{})
		client, server := dialPair(t, a, b)
		defer client.Close()
		defer server.Close()
		go func() {
			one := make([]byte, 1)
			for {
				if _, err := server.Read(one); err != nil {
					return
				}
				if _, err := server.Write(one); err != nil {
					return
				}
			}
		}()
		one := make([]byte, 1)
		for i := range 2000 {
			one[0] = byte(i)
			if _, err := client.Write(one); err != nil {
				t.Fatal(err)
			}
			client.SetReadDeadline(time.Now().Add(hang))
			if _, err := client.Read(one); err != nil {
				lost(t, "the client's Read", err)
			}
			if one[0] != byte(i) {
				t.Fatalf("echo %d: got %d", i, one[0])
			}
		}
	})
	t.Run("bulk through a small send buffer", func(t *testing.T) {
		a, b := pair(t, Config{TCP: tcp.Config{SendBuffer: 8 << 10, SendBufferMax: 8 << 10}})
		client, server := dialPair(t, a, b)
		defer client.Close()
		defer server.Close()
		data := bytes.Repeat([]byte("wakeup"), 1<<20/6)
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(server)
			got <- b
		}()
		client.SetWriteDeadline(time.Now().Add(hang))
		if _, err := client.Write(data); err != nil {
			lost(t, "Write", err)
		}
		client.(*Conn).CloseWrite()
		select {
		case b := <-got:
			if !bytes.Equal(b, data) {
				t.Fatalf("received %d bytes, not the %d written", len(b), len(data))
			}
		case <-time.After(hang):
			t.Fatal("the receiver still reading: a lost wakeup")
		}
		if w := client.(*Conn).made.Load(); w&waitWritable == 0 {
			t.Fatal("the Write never waited: a buffer too large for the test")
		}
	})
}
