package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// recordedPair is pair with both stacks recording (their packets whole with
// payload, else their headers only), and the client's link losing loss of its
// packets each way (seeded).
func recordedPair(t *testing.T, loss float64, payload bool) (a, b *Stack, ra, rb *bytes.Buffer) {
	t.Helper()
	return recordedPairWith(t, loss, Config{RecordPayload: payload}, false)
}

// recordedPairWith is recordedPair with cfg's other settings (Device,
// Addr, Addr6 and Record are the pair's), and with IPv6 (addr6A, addr6B)
// if v6.
func recordedPairWith(t *testing.T, loss float64, cfg Config, v6 bool) (a, b *Stack, ra, rb *bytes.Buffer) {
	t.Helper()
	da, db := tuntest.Pipe(1500)
	if loss > 0 {
		d, err := impair.Wrap(da, impair.Config{Seed: 7, EgressLoss: loss, IngressLoss: loss})
		if err != nil {
			t.Fatal(err)
		}
		da = d
	}
	ra, rb = new(bytes.Buffer), new(bytes.Buffer)
	ca, cb := cfg, cfg
	ca.Device, ca.Addr, ca.Record = da, addrA, ra
	cb.Device, cb.Addr, cb.Record = db, addrB, rb
	if v6 {
		ca.Addr6, cb.Addr6 = addr6A, addr6B
	}
	var err error
	if a, err = New(ca); err != nil {
		t.Fatal(err)
	}
	if b, err = New(cb); err != nil {
		t.Fatal(err)
	}
	return a, b, ra, rb
}

// exchange runs conns echo connections of size bytes each between a and b,
// at once, and closes both stacks.
func exchange(t *testing.T, a, b *Stack, conns, size int) {
	t.Helper()
	ln, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	go serveEcho(ln)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := a.DialContext(ctx, "tcp", "198.18.0.2:7")
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			msg := bytes.Repeat([]byte{byte('a' + i)}, size)
			go func() { c.Write(msg); c.(*Conn).CloseWrite() }()
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, msg) {
				errs <- fmt.Errorf("conn %d: echo of %d bytes: got %d, %v", i, size, len(got), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ln.Close()
	time.Sleep(50 * time.Millisecond) // the last ACKs
	a.Close()
	b.Close()
}

// serveEcho echoes each connection ln accepts until ln closes.
func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.Copy(c, c)
		}()
	}
}

// checkReplay plays rec back and wants every packet the recorded stack sent,
// byte for byte and at its instant.
func checkReplay(t *testing.T, name string, buf []byte) {
	t.Helper()
	rec, err := record.Parse(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	checkReplayOf(t, name, rec)
}

// checkReplayOf is checkReplay of a parsed recording.
func checkReplayOf(t *testing.T, name string, rec *record.Recording) {
	t.Helper()
	var want []record.Event
	for _, e := range rec.Events {
		if e.Kind == record.Out {
			want = append(want, e)
		}
	}
	p, err := NewPlayback(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	for _, d := range p.Divergences() {
		t.Errorf("%s: %v", name, d)
	}
	// Per connection: timers of two connections due in the same tick may
	// fire in either order (the wheel's lists), which changes how their
	// packets interleave and so the IP IDs, nothing else.
	got := p.Sent()
	if len(got) != len(want) {
		t.Errorf("%s: replay sent %d packets, the recording %d", name, len(got), len(want))
	}
	type key struct{ a, b string }
	split := func(evs []record.Event) map[key][]record.Event {
		m := map[key][]record.Event{}
		for _, e := range evs {
			id, _, _ := parseTCP(e.Whole())
			k := key{id.Local.String(), id.Remote.String()}
			m[k] = append(m[k], e)
		}
		return m
	}
	gm, wm := split(got), split(want)
	for k, w := range wm {
		g := gm[k]
		if len(g) != len(w) {
			t.Errorf("%s: %v: replay sent %d packets, the recording %d", name, k, len(g), len(w))
		}
		for i := range min(len(g), len(w)) {
			x, y := g[i].Data, w[i].Data
			if !SentMatches(&w[i], &g[i]) {
				t.Errorf("%s: %v: packet %d (event #%d): got %x at %v, want %x at %v", name, k, i+1, w[i].Index, x[:min(len(x), 60)], g[i].T, y[:min(len(y), 60)], w[i].T)
				break
			}
		}
	}
	if len(want) == 0 {
		t.Errorf("%s: the recording has no packets sent", name)
	}
}

func TestFlightRecordingReplaysExactly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		loss    float64
		conns   int
		size    int
		payload bool
	}{
		{"one connection", 0, 1, 100 << 10, false},
		{"one connection, payloads", 0, 1, 100 << 10, true},
		{"five connections", 0, 5, 64 << 10, false},
		{"loss 3%", 0.03, 3, 64 << 10, false},
		{"loss 3%, payloads", 0.03, 3, 64 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ra, rb := recordedPair(t, tc.loss, tc.payload)
			exchange(t, a, b, tc.conns, tc.size)
			if t.Failed() {
				if dir := os.Getenv("TCPWHEEL_KEEP_FAILED"); dir != "" {
					os.WriteFile(dir+"/dialer.pcapng", ra.Bytes(), 0o644)
					os.WriteFile(dir+"/listener.pcapng", rb.Bytes(), 0o644)
				}
			}
			if err := a.RecordErr(); err != nil {
				t.Fatal(err)
			}
			checkReplay(t, "dialer", ra.Bytes())
			checkReplay(t, "listener", rb.Bytes())
		})
	}
}

// A re-recording of an unchanged replay is the recording itself, bytes and
// all (one connection: see checkReplay on several; with payloads: without,
// the replayed segments carry zeros, and checksums over them).
func TestFlightRerecordIsIdentical(t *testing.T) {
	a, b, ra, rb := recordedPair(t, 0.02, true)
	exchange(t, a, b, 1, 64<<10)
	if t.Failed() {
		if dir := os.Getenv("TCPWHEEL_KEEP_FAILED"); dir != "" {
			os.WriteFile(dir+"/dialer.pcapng", ra.Bytes(), 0o644)
			os.WriteFile(dir+"/listener.pcapng", rb.Bytes(), 0o644)
		}
		t.FailNow()
	}
	checkRerecord(t, rb.Bytes())
}

// checkRerecord wants the re-recording of a replay of buf to be buf itself.
func checkRerecord(t *testing.T, buf []byte) {
	t.Helper()
	rec, err := record.Parse(bytes.NewReader(buf))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	p, err := NewPlayback(rec, &again)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), buf) {
		t.Fatalf("re-recording differs: %d bytes, the recording %d", again.Len(), len(buf))
	}
}

// A listener closed with connections still waiting for Accept resets them
// (closeLoop): the recording must say so, for in a Playback the accept
// queue is empty (the recording answers whether a connection went into it,
// the application's goroutines take it out), and the replay would not send
// those resets.
func TestFlightListenerCloseResetsQueued(t *testing.T) {
	a, b, ra, rb := recordedPair(t, 0, false)
	ln, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var conns []net.Conn
	for range 2 {
		c, err := a.DialContext(ctx, "tcp", "198.18.0.2:7")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	ln.Close() // neither was accepted: both are reset
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read after the listener closed: %v, want a reset", err)
		}
	}
	a.Close()
	b.Close()
	checkReplay(t, "dialer", ra.Bytes())
	checkReplay(t, "listener", rb.Bytes())
}

// A stack closed with connections open resets them all, in the order of its
// connection map, which differs from run to run: the recording replays
// exactly all the same (a reset reads no send time; each connection's
// packets are compared on their own).
func TestFlightStackCloseWithOpenConns(t *testing.T) {
	a, b, ra, rb := recordedPair(t, 0, false)
	ln, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 5 {
		c, err := a.DialContext(ctx, "tcp", "198.18.0.2:7")
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, make([]byte, 5)); err != nil {
			t.Fatal(err)
		}
	}
	b.Close() // five connections open: five resets
	a.Close()
	checkReplay(t, "dialer", ra.Bytes())
	checkReplay(t, "listener", rb.Bytes())
	rec, err := record.Parse(bytes.NewReader(rb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	rsts := 0
	for _, e := range rec.Events {
		if _, seg, ok := parseTCP(e.Data); ok && e.Kind == record.Out && seg.Flags&tcp.FlagRST != 0 {
			rsts++
		}
	}
	if rsts != 5 {
		t.Errorf("the listener's stack sent %d resets at its close, want 5", rsts)
	}
}

// TestFlightRecordingReplaysUDP: two recording stacks exchange UDP (an echo
// server, a connected and an unconnected client, a datagram to a closed port
// and its ICMP, sockets closed and reopened); each recording replays
// exactly, packet by packet, bytes and instants.
func TestFlightRecordingReplaysUDP(t *testing.T) {
	a, b, ra, rb := recordedPair(t, 0, true)
	srv, served := udpEcho(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.DialContext(ctx, "udp", "198.18.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)
	for i := range 20 {
		msg := bytes.Repeat([]byte{byte('a' + i)}, 1+i*70)
		c.Write(msg)
		if n, err := c.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo %d: %d bytes, %v", i, n, err)
		}
	}
	c.Close()
	pc, err := a.ListenPacket("udp", ":4000")
	if err != nil {
		t.Fatal(err)
	}
	pc.SetDeadline(time.Now().Add(10 * time.Second))
	for _, port := range []int{7, 9, 7} { // 9 is closed: an ICMP port unreachable
		pc.WriteTo([]byte("to "+fmt.Sprint(port)), &net.UDPAddr{IP: net.IPv4(198, 18, 0, 2), Port: port})
		if port == 7 {
			if n, _, err := pc.ReadFrom(buf); err != nil || string(buf[:n]) != "to 7" {
				t.Fatalf("echo to the unconnected socket: %q, %v", buf[:n], err)
			}
		}
	}
	srv.Close()
	<-served
	pc.WriteTo([]byte("after close"), &net.UDPAddr{IP: net.IPv4(198, 18, 0, 2), Port: 7})
	time.Sleep(50 * time.Millisecond) // the ICMP
	pc.Close()
	a.Close()
	b.Close()
	for _, rec := range []*bytes.Buffer{ra, rb} {
		r, err := record.Parse(bytes.NewReader(rec.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[record.Kind]int{}
		icmp := 0
		for _, e := range r.Events {
			kinds[e.Kind]++
			if e.Kind == record.Out && len(e.Data) > 21 && e.Data[9] == protoICMP && e.Data[20] == 3 {
				icmp++
			}
		}
		if rec == rb && (kinds[record.UDPOpen] != 1 || kinds[record.UDPSend] != 22 || kinds[record.UDPClose] != 1 || icmp != 2) {
			t.Errorf("server's recording: %d opens, %d sends, %d closes, %d port unreachables; want 1, 22, 1, 2", kinds[record.UDPOpen], kinds[record.UDPSend], kinds[record.UDPClose], icmp)
		}
		if rec == ra && (kinds[record.UDPDial] != 1 || kinds[record.UDPOpen] != 1 || kinds[record.UDPSend] != 24 || kinds[record.UDPClose] != 2) {
			t.Errorf("client's recording: %d dials, %d opens, %d sends, %d closes; want 1, 1, 24, 2", kinds[record.UDPDial], kinds[record.UDPOpen], kinds[record.UDPSend], kinds[record.UDPClose])
		}
	}
	checkReplay(t, "client", ra.Bytes())
	checkReplay(t, "server", rb.Bytes())
	checkRerecord(t, rb.Bytes())
}

// A recording from before new data went in chunks of half cwnd
// (2026-11-24) has neither record.Header.HalfCwndChunks nor the setting in
// its TCP header, and its stack sent TSO segments as large as the windows
// allowed: its replay does the same. Such a recording is made here with
// tcp.Config.DisableHalfCwndChunks and TSO segments (GSOMax; a TSO segment
// is one transmission, one reading of the clock), the header then stripped
// of both; the replay must send what it sent (without the playback's rule
// for such recordings it cuts its chunks at half cwnd, reads the clock
// more often and diverges).
func TestFlightRecordingChunksBefore(t *testing.T) {
	a, b, ra, _ := recordedPairWith(t, 0.01, Config{TCP: tcp.Config{GSOMax: 60000, DisableHalfCwndChunks: true}}, false)
	exchange(t, a, b, 2, 256<<10)
	rec, err := record.Parse(bytes.NewReader(ra.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Header.HalfCwndChunks || !rec.Header.TCP.DisableHalfCwndChunks || rec.Header.TCP.GSOMax != 60000 {
		t.Fatalf("the recording's header: half_cwnd_chunks %v, disable_half_cwnd_chunks %v, gso_max %d; want both and 60000",
			rec.Header.HalfCwndChunks, rec.Header.TCP.DisableHalfCwndChunks, rec.Header.TCP.GSOMax)
	}
	checkReplayOf(t, "client, as recorded", rec)
	rec.Header.HalfCwndChunks, rec.Header.TCP.DisableHalfCwndChunks = false, false
	checkReplayOf(t, "client, as an old recording", rec)
}

// A recording from before the ACKs of out-of-order segments waited for the
// end of their batch (2026-11-24) has neither record.Header.OOOAcksHeld nor
// the setting in its TCP header, and its stack ACKed each such segment at
// once: its replay does the same. Such a recording is made here with
// tcp.Config.OutOfOrderAcksAtOnce (3% loss: out-of-order segments inside
// batches), the header then stripped of both; the replay must send what it
// sent (without the playback's rule for such recordings it holds those ACKs
// and diverges).
func TestFlightRecordingOutOfOrderAcksBefore(t *testing.T) {
	a, b, _, rb := recordedPairWith(t, 0.03, Config{TCP: tcp.Config{OutOfOrderAcksAtOnce: true}}, false)
	exchange(t, a, b, 3, 64<<10)
	rec, err := record.Parse(bytes.NewReader(rb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Header.OOOAcksHeld || !rec.Header.TCP.OutOfOrderAcksAtOnce {
		t.Fatalf("the recording's header: ooo_acks_held %v, out_of_order_acks_at_once %v; want both", rec.Header.OOOAcksHeld, rec.Header.TCP.OutOfOrderAcksAtOnce)
	}
	rec.Header.OOOAcksHeld, rec.Header.TCP.OutOfOrderAcksAtOnce = false, false
	checkReplayOf(t, "listener, as an old recording", rec)
}
