package dnsrv

import (
	"bytes"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// unhex decodes hex with spaces and newlines in it.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testResponder(t testing.TB) *Responder {
	t.Helper()
	r, err := New(Zone{Name: DefaultName, Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("2001:db8::2")}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const (
	// tcpwheel.test. as a name on the wire.
	wireName = "08 746370776865656c 04 74657374 00"
	// x.tcpwheel.test.
	wireSub = "01 78" + wireName
)

// TestRespondBytes checks whole answers byte for byte.
func TestRespondBytes(t *testing.T) {
	r := testResponder(t)
	for _, tc := range []struct {
		name, query, want string
	}{
		{
			"A",
			"1234 0100 0001 0000 0000 0000" + wireName + "0001 0001",
			"1234 8500 0001 0001 0000 0000" + wireName + "0001 0001" +
				"c00c 0001 0001 0000003c 0004 c6120002",
		},
		{
			"AAAA, name in another case",
			"beef 0100 0001 0000 0000 0000 08 544350776865656c 04 54455354 00 001c 0001",
			"beef 8500 0001 0001 0000 0000 08 544350776865656c 04 54455354 00 001c 0001" +
				"c00c 001c 0001 0000003c 0010 20010db8000000000000000000000002",
		},
		{
			"A with EDNS: an OPT back",
			"0001 0000 0001 0000 0000 0001" + wireName + "0001 0001" + "00 0029 1000 00000000 0000",
			"0001 8400 0001 0001 0000 0001" + wireName + "0001 0001" +
				"c00c 0001 0001 0000003c 0004 c6120002" +
				"00 0029 04d0 00000000 0000",
		},
		{
			"MX of the name: no data, the SOA",
			"0002 0100 0001 0000 0000 0000" + wireName + "000f 0001",
			"0002 8500 0001 0000 0001 0000" + wireName + "000f 0001" +
				"c00c 0006 0001 0000003c 0023 c00c 0a 686f73746d6173746572 c00c" +
				"00000001 00000e10 00000258 00015180 0000003c",
		},
		{
			"NXDOMAIN under the zone, with the SOA",
			"0003 0100 0001 0000 0000 0000" + wireSub + "0001 0001",
			"0003 8503 0001 0000 0001 0000" + wireSub + "0001 0001" +
				"c00e 0006 0001 0000003c 0023 c00e 0a 686f73746d6173746572 c00e" +
				"00000001 00000e10 00000258 00015180 0000003c",
		},
		{
			"REFUSED outside the zone",
			"0004 0100 0001 0000 0000 0000 04 74657374 00 0001 0001",
			"0004 8105 0001 0000 0000 0000 04 74657374 00 0001 0001",
		},
		{
			"REFUSED for class CHAOS",
			"0005 0000 0001 0000 0000 0000" + wireName + "0010 0003",
			"0005 8005 0001 0000 0000 0000" + wireName + "0010 0003",
		},
		{
			"FORMERR without a question",
			"0006 0100 0000 0000 0000 0000",
			"0006 8101 0000 0000 0000 0000",
		},
		{
			"FORMERR with two questions",
			"0007 0100 0002 0000 0000 0000" + wireName + "0001 0001" + wireName + "001c 0001",
			"0007 8101 0000 0000 0000 0000",
		},
		{
			"FORMERR for a truncated question",
			"0008 0100 0001 0000 0000 0000 08 74637077",
			"0008 8101 0000 0000 0000 0000",
		},
		{
			"FORMERR for two OPTs",
			"0009 0000 0001 0000 0000 0002" + wireName + "0001 0001" + "00 0029 1000 00000000 0000 00 0029 1000 00000000 0000",
			"0009 8001 0001 0000 0000 0000" + wireName + "0001 0001",
		},
		{
			"BADVERS for EDNS version 1",
			"000a 0000 0001 0000 0000 0001" + wireName + "0001 0001" + "00 0029 1000 00010000 0000",
			"000a 8000 0001 0000 0000 0001" + wireName + "0001 0001" + "00 0029 04d0 01000000 0000",
		},
		{
			"NOTIMP for NOTIFY",
			"000b 2000 0001 0000 0000 0000" + wireName + "0006 0001",
			"000b a004 0000 0000 0000 0000",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Respond(unhex(t, tc.query))
			if want := unhex(t, tc.want); !bytes.Equal(got, want) {
				t.Fatalf("answer\n got % x\nwant % x", got, want)
			}
		})
	}
}

// TestRespondNothing: no answer to what is not a query.
func TestRespondNothing(t *testing.T) {
	r := testResponder(t)
	for _, q := range []string{
		"",
		"1234 0100 0001 0000 0000", // shorter than a header
		"1234 8100 0001 0000 0000 0000" + wireName + "0001 0001",           // a response
		"1234 8503 0001 0000 0000 0000" + wireName + "0001 0001 c00c 0001", // a broken response
	} {
		if got := r.Respond(unhex(t, q)); got != nil {
			t.Errorf("answer to %s: % x, want none", q, got)
		}
	}
}

// TestRespondANY: ANY at the name gets every record.
func TestRespondANY(t *testing.T) {
	r := testResponder(t)
	resp := r.Respond(unhex(t, "0001 0000 0001 0000 0000 0000"+wireName+"00ff 0001"))
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, a := range m.Answers {
		types = append(types, a.Header.Type.String())
	}
	if m.RCode != dnsmessage.RCodeSuccess || strings.Join(types, " ") != "TypeA TypeAAAA TypeSOA" {
		t.Fatalf("ANY: %v, answers %v", m.RCode, types)
	}
}

// TestServeConn: two queries over a stream, each answered with its length
// in front; a response ends the conversation.
func TestServeConn(t *testing.T) {
	r := testResponder(t)
	c, peer := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- r.ServeConn(c); c.Close() }()
	q1 := unhex(t, "1234 0100 0001 0000 0000 0000"+wireName+"0001 0001")
	q2 := unhex(t, "0003 0100 0001 0000 0000 0000"+wireSub+"0001 0001")
	resp := unhex(t, "1234 8100 0000 0000 0000 0000")
	go func() {
		for _, q := range [][]byte{q1, q2, resp} {
			peer.Write(append([]byte{byte(len(q) >> 8), byte(len(q))}, q...))
		}
	}()
	for _, q := range [][]byte{q1, q2} {
		want := r.Respond(q)
		got := make([]byte, 2+len(want))
		if _, err := io.ReadFull(peer, got); err != nil {
			t.Fatal(err)
		}
		if int(got[0])<<8|int(got[1]) != len(want) || !bytes.Equal(got[2:], want) {
			t.Fatalf("over TCP: % x, want the length, then % x", got, want)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("ServeConn: %v", err)
	}
	if n, err := peer.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after a response: read %d, %v; want EOF", n, err)
	}
}

func TestNew(t *testing.T) {
	for _, name := range []string{"", "no-dot", strings.Repeat("a", 64) + ".test."} {
		if _, err := New(Zone{Name: name}); err == nil {
			t.Errorf("New(%q) succeeded", name)
		}
	}
	// No IPv6 address: AAAA has no data.
	r, err := New(Zone{Name: "Example.TEST.", Addrs: []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.1"), {}}})
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	q := "0001 0000 0001 0000 0000 0000 07 6578616d706c65 04 74657374 00"
	if err := m.Unpack(r.Respond(unhex(t, q+"001c 0001"))); err != nil || len(m.Answers) != 0 || len(m.Authorities) != 1 || m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("AAAA: %v, %+v", err, m)
	}
	if err := m.Unpack(r.Respond(unhex(t, q+"0001 0001"))); err != nil || len(m.Answers) != 1 || m.Answers[0].Body.(*dnsmessage.AResource).A != [4]byte{192, 0, 2, 1} {
		t.Fatalf("A: %v, %+v", err, m)
	}
}

// FuzzRespond: any input gets no answer or a well-formed one to the same ID,
// and never a panic.
func FuzzRespond(f *testing.F) {
	r := testResponder(f)
	for _, s := range []string{
		"1234 0100 0001 0000 0000 0000" + wireName + "0001 0001",
		"0001 0000 0001 0000 0000 0001" + wireName + "001c 0001" + "00 0029 1000 00000000 0000",
		"0003 0100 0001 0000 0000 0000" + wireSub + "00ff 0001",
		"0007 0100 0002 0000 0000 0000" + wireName + "0001 0001 c00c 001c 0001",
		"0008 0100 0001 0000 0000 0000 08 74637077",
	} {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		resp := r.Respond(q)
		if resp == nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("unreadable answer % x to % x: %v", resp, q, err)
		}
		if !m.Response || len(q) < 2 || m.ID != uint16(q[0])<<8|uint16(q[1]) || len(resp) > 512 {
			t.Fatalf("answer %+v (%d bytes) to % x", m.Header, len(resp), q)
		}
	})
}
