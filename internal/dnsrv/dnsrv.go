// Package dnsrv is a tiny authoritative DNS responder (RFC 1034, RFC 1035)
// for one name: `tcpwheel run` serves it on port 53 of the stack (UDP, and
// TCP with ServeConn), so
// that dig from the kernel side has something to ask. It answers A and
// AAAA queries for the zone's name with the zone's addresses, says NXDOMAIN
// for any other name under it, REFUSED for names outside it, FORMERR for
// queries it cannot read and NOTIMP for opcodes other than QUERY; it never
// answers a response (no loops between two responders). Messages are read
// and written with golang.org/x/net/dns/dnsmessage.
package dnsrv

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// DefaultName is the name `tcpwheel run` serves: under .test, which RFC
// 6761 6.2 reserves for testing, so that it can never shadow a real name.
const DefaultName = "tcpwheel.test."

// TTL is the time to live of every record served, in seconds.
const TTL = 60

// ednsPayload is the UDP payload size this responder advertises in its OPT
// records (the DNS flag day 2020 value).
const ednsPayload = 1232

// maxEDNSVersion is the highest EDNS version understood (RFC 6891 6.1.3).
const maxEDNSVersion = 0

// Zone is what a Responder serves: one name, the apex of the zone, and its
// addresses.
type Zone struct {
	// Name is the zone's only name with data, fully qualified ("tcpwheel.test.").
	Name string
	// Addrs are the name's addresses: IPv4 ones answer A queries, IPv6 ones
	// AAAA queries.
	Addrs []netip.Addr
}

// Responder answers queries about a Zone. Its methods are safe for
// concurrent use; it holds no state beyond the zone.
type Responder struct {
	name  dnsmessage.Name // lower case
	lower string
	a     []dnsmessage.AResource
	aaaa  []dnsmessage.AAAAResource
	soa   dnsmessage.SOAResource
}

// New returns a Responder for z, or an error if z.Name is not a valid
// fully qualified domain name.
func New(z Zone) (*Responder, error) {
	lower := strings.ToLower(z.Name)
	name, err := dnsmessage.NewName(lower)
	if err != nil {
		return nil, err
	}
	// Packing checks what NewName does not: a trailing dot, label lengths.
	if err := checkName(name); err != nil {
		return nil, err
	}
	mbox, err := dnsmessage.NewName("hostmaster." + lower)
	if err != nil {
		return nil, err
	}
	r := &Responder{name: name, lower: lower}
	r.soa = dnsmessage.SOAResource{NS: name, MBox: mbox, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, MinTTL: TTL}
	for _, a := range z.Addrs {
		a = a.Unmap()
		if a.Is4() {
			r.a = append(r.a, dnsmessage.AResource{A: a.As4()})
		} else if a.Is6() {
			r.aaaa = append(r.aaaa, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
	}
	return r, nil
}

// checkName packs a question for name, which fails for names that are not
// fully qualified or have labels that are too long.
func checkName(name dnsmessage.Name) error {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{})
	if err := b.StartQuestions(); err != nil {
		return err
	}
	return b.Question(dnsmessage.Question{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
}

// Serve answers the queries that arrive on pc until reading from it fails
// (it is closed), and returns that error.
func (r *Responder) Serve(pc net.PacketConn) error {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if resp := r.Respond(buf[:n]); resp != nil {
			pc.WriteTo(resp, from)
		}
	}
}

// tcpIdle is how long ServeConn waits for the next query on a connection
// (RFC 7766 6.2.3: "on the order of seconds").
const tcpIdle = 10 * time.Second

// ServeConn answers queries over a stream (DNS over TCP, RFC 1035 4.2.2 and
// RFC 7766: each message preceded by its length in two bytes) until the
// peer closes, sends something that deserves no answer, or is idle for
// tcpIdle; it does not close c. dig asks over TCP for ANY and with +tcp.
func (r *Responder) ServeConn(c net.Conn) error {
	var n [2]byte
	buf := make([]byte, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(tcpIdle))
		if _, err := io.ReadFull(c, n[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		msg := buf[:binary.BigEndian.Uint16(n[:])]
		if _, err := io.ReadFull(c, msg); err != nil {
			return err
		}
		resp := r.Respond(msg)
		if resp == nil {
			return nil
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return err
		}
	}
}

// Respond returns the answer to the query msg, or nil when msg deserves no
// answer: shorter than a header, or a response itself.
func (r *Responder) Respond(msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	if h.OpCode != 0 { // only QUERY
		return r.build(resp, dnsmessage.RCodeNotImplemented, nil, false)
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return r.build(resp, dnsmessage.RCodeFormatError, nil, false)
	}
	q := qs[0]
	if err := p.SkipAllAnswers(); err != nil {
		return r.build(resp, dnsmessage.RCodeFormatError, &q, false)
	}
	if err := p.SkipAllAuthorities(); err != nil {
		return r.build(resp, dnsmessage.RCodeFormatError, &q, false)
	}
	adds, err := p.AllAdditionals()
	if err != nil {
		return r.build(resp, dnsmessage.RCodeFormatError, &q, false)
	}
	// EDNS (RFC 6891): at most one OPT, whose name is the root; an OPT in
	// the query gets one in the answer.
	edns, version := false, 0
	for _, rr := range adds {
		if rr.Header.Type != dnsmessage.TypeOPT {
			continue
		}
		if edns || rr.Header.Name.Length != 1 || rr.Header.Name.Data[0] != '.' {
			return r.build(resp, dnsmessage.RCodeFormatError, &q, false)
		}
		edns, version = true, int(rr.Header.TTL>>16&0xff)
	}
	if version > maxEDNSVersion {
		return r.build(resp, rcodeBadVers, &q, true)
	}
	return r.answer(resp, q, edns)
}

// rcodeBadVers is BADVERS (RFC 6891 9): 16, so it needs an OPT's extended
// RCODE bits.
const rcodeBadVers = dnsmessage.RCode(16)

// answer answers the well-formed question q.
func (r *Responder) answer(h dnsmessage.Header, q dnsmessage.Question, edns bool) []byte {
	name := strings.ToLower(q.Name.String())
	inZone := name == r.lower || strings.HasSuffix(name, "."+r.lower)
	if q.Class != dnsmessage.ClassINET || !inZone {
		return r.build(h, dnsmessage.RCodeRefused, &q, edns)
	}
	h.Authoritative = true
	if name != r.lower {
		return r.buildWith(h, dnsmessage.RCodeNameError, &q, edns, nil)
	}
	return r.buildWith(h, dnsmessage.RCodeSuccess, &q, edns, func(b *dnsmessage.Builder) (int, error) {
		n := 0
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: TTL}
		if q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeALL {
			for _, a := range r.a {
				if err := b.AResource(rh, a); err != nil {
					return n, err
				}
				n++
			}
		}
		if q.Type == dnsmessage.TypeAAAA || q.Type == dnsmessage.TypeALL {
			for _, a := range r.aaaa {
				if err := b.AAAAResource(rh, a); err != nil {
					return n, err
				}
				n++
			}
		}
		if q.Type == dnsmessage.TypeSOA || q.Type == dnsmessage.TypeALL {
			if err := b.SOAResource(rh, r.soa); err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	})
}

// build is an answer without records.
func (r *Responder) build(h dnsmessage.Header, rcode dnsmessage.RCode, q *dnsmessage.Question, edns bool) []byte {
	return r.buildWith(h, rcode, q, edns, nil)
}

// buildWith packs the answer: header with rcode, the question q if any, the
// answers that answers adds, the zone's SOA in the authority section of an
// authoritative answer without answers (a negative answer, RFC 2308 3) and
// an OPT record if edns.
func (r *Responder) buildWith(h dnsmessage.Header, rcode dnsmessage.RCode, q *dnsmessage.Question, edns bool, answers func(*dnsmessage.Builder) (int, error)) []byte {
	h.RCode = rcode & 0xf
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil
	}
	if q != nil {
		if err := b.Question(*q); err != nil {
			return nil
		}
	}
	if err := b.StartAnswers(); err != nil {
		return nil
	}
	n := 0
	if answers != nil {
		var err error
		if n, err = answers(&b); err != nil {
			return nil
		}
	}
	if err := b.StartAuthorities(); err != nil {
		return nil
	}
	if h.Authoritative && n == 0 {
		rh := dnsmessage.ResourceHeader{Name: r.name, Class: dnsmessage.ClassINET, TTL: TTL}
		if err := b.SOAResource(rh, r.soa); err != nil {
			return nil
		}
	}
	if err := b.StartAdditionals(); err != nil {
		return nil
	}
	if edns {
		var rh dnsmessage.ResourceHeader
		if err := rh.SetEDNS0(ednsPayload, rcode, false); err != nil {
			return nil
		}
		if err := b.OPTResource(rh, dnsmessage.OPTResource{}); err != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
