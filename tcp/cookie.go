package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// SYN cookies (RFC 4987 3.6), as Linux makes them (net/ipv4/syncookies.c):
// when a listener's half-open table is full, a SYN is answered with a SYN-ACK
// whose ISN is a cookie and nothing is kept; the ACK that returns the cookie
// (SEG.ACK - 1) proves the peer received the SYN-ACK at its address, and the
// connection is created from it, ESTABLISHED.
//
// The cookie, Linux's secure_tcp_syn_cookie:
//
//	ISN = H(4-tuple, 0) + SEG.SEQ of the SYN + count<<24 + ((H(4-tuple, count) + mss index) mod 2^24)
//
// where H is a keyed hash (HMAC-SHA-256 with the listener's own random secret,
// truncated to 32 bits), count a counter of cookiePeriod periods of the
// wheel's time, and the mss index the position in cookieMSS of the largest
// MSS not above the peer's. The check undoes the first two terms, takes the
// count from the top 8 bits (valid for cookieMaxAge periods: the current one
// and the one before), and recovers the index, which must be below
// len(cookieMSS): an ACK that guesses passes with a chance of 2^-22 per
// guess of the period. (An ACK or SEQ off by 1 to 3 may land on another
// index: Linux's cookie has the same slack.)
//
// The SYN's other options cannot fit in the ISN. When both ends use
// timestamps, they ride in the low 6 bits of our TSval (Linux's
// cookie_init_timestamp), which the peer echoes in the ACK's TSecr: the peer's
// window shift (cookieNoWS when it sent none) and whether it permits SACK. Our
// own window shift is the configuration's, as the SYN-ACK announced it.
// Without timestamps the cookie SYN-ACK offers the MSS alone, and the
// connection has neither window scaling nor SACK (Linux's tcp_clear_options).

// cookieMSS is Linux's msstab: the MSS values a cookie can carry.
var cookieMSS = [...]uint16{536, 1300, 1440, 1460}

const (
	cookiePeriod = 64 * time.Second // the counter's tick (Linux: one a minute)
	cookieMaxAge = 2                // periods a cookie stays valid (Linux MAX_SYNCOOKIE_AGE)
	cookieBits   = 24               // the low bits: hash + mss index; the count is above (Linux COOKIEBITS)
	cookieMask   = 1<<cookieBits - 1

	cookieTSBits = 6 // the low bits of our TSval that carry the SYN's options (Linux TSBITS)
	cookieTSMask = 1<<cookieTSBits - 1
	cookieNoWS   = 0xf    // the TSval's low 4 bits: the peer's window shift, all ones for none (Linux TS_OPT_WSCALE_MASK)
	cookieTSSACK = 1 << 4 // in the TSval: the peer permits SACK (Linux TS_OPT_SACK)
)

// synCookies makes and checks one listener's SYN cookies. Its secret is drawn
// from crypto/rand when the listener is made; nothing is shared between
// listeners.
type synCookies struct {
	mac  hash.Hash // HMAC-SHA-256 keyed with the secret
	in   [16 + 16 + 4 + 4 + 1]byte
	sum  []byte
	last time.Duration // when a cookie was last sent
	sent bool          // a cookie was ever sent
}

// CookieKeySize is the size of a SYN-cookie key (ListenerConfig.CookieKey).
const CookieKeySize = 32

// NewCookieKey draws a SYN-cookie key from crypto/rand.
func NewCookieKey() []byte {
	key := make([]byte, CookieKeySize)
	rand.Read(key) // never fails (crypto/rand, Go 1.24)
	return key
}

func newSynCookies(key []byte) synCookies {
	if key == nil {
		key = NewCookieKey()
	}
	return synCookies{mac: hmac.New(sha256.New, key)}
}

// hash is H(4-tuple, count), 32 bits of the keyed hash; which tells the two
// hashes of a cookie apart.
func (c *synCookies) hash(id ID, count uint32, which byte) uint32 {
	b := c.in[:0]
	l, r := id.Local.Addr().As16(), id.Remote.Addr().As16()
	b = append(b, l[:]...)
	b = append(b, r[:]...)
	b = binary.BigEndian.AppendUint16(b, id.Local.Port())
	b = binary.BigEndian.AppendUint16(b, id.Remote.Port())
	b = binary.BigEndian.AppendUint32(b, count)
	b = append(b, which)
	c.mac.Reset()
	c.mac.Write(b)
	c.sum = c.mac.Sum(c.sum[:0])
	return binary.BigEndian.Uint32(c.sum)
}

// count is the cookie counter at the wheel's instant now.
func cookieCount(now time.Duration) uint32 { return uint32(now / cookiePeriod) }

// cookieMSSIndex is the index in cookieMSS of the largest MSS not above mss
// (0 below the smallest), as Linux's cookie_v4_init_sequence.
func cookieMSSIndex(mss int) uint32 {
	i := len(cookieMSS) - 1
	for i > 0 && mss < int(cookieMSS[i]) {
		i--
	}
	return uint32(i)
}

// make returns the cookie for a SYN of id with sequence number seq, at now.
func (c *synCookies) make(id ID, seq seqnum.Value, mssIndex uint32, now time.Duration) seqnum.Value {
	count := cookieCount(now)
	c.last, c.sent = now, true
	return seqnum.Value(c.hash(id, 0, 0) + uint32(seq) + count<<cookieBits + // RFC 4987 3.6: t, and the hash
		(c.hash(id, count, 1)+mssIndex)&cookieMask) // the MSS index, hidden in the second hash
}

// check takes an ACK of id whose SEG.SEQ is seq+1 and SEG.ACK is cookie+1, at
// now, and returns the MSS index the cookie carries, or false if it is not one
// of ours from the last cookieMaxAge periods.
func (c *synCookies) check(id ID, seq, cookie seqnum.Value, now time.Duration) (uint32, bool) {
	count := cookieCount(now)
	v := uint32(cookie) - c.hash(id, 0, 0) - uint32(seq)
	age := (count - v>>cookieBits) & (1<<(32-cookieBits) - 1)
	if age >= cookieMaxAge {
		return 0, false // RFC 4987 3.6: too old (or not a cookie at all)
	}
	idx := (v - c.hash(id, count-age, 1)) & cookieMask
	if idx >= uint32(len(cookieMSS)) {
		return 0, false
	}
	return idx, true
}

// recent reports whether a cookie sent now or later may still be answered:
// one was sent within the last cookieMaxAge periods (Linux's
// tcp_synq_no_recent_overflow). Only then is an unknown ACK checked.
func (c *synCookies) recent(now time.Duration) bool {
	return c.sent && now-c.last < cookieMaxAge*cookiePeriod
}

// cookieTSVal is our TSval tsNow with the SYN's options in its low bits, not
// after tsNow (Linux's cookie_init_timestamp): the peer's window shift
// (cookieNoWS for none) and cookieTSSACK.
func cookieTSVal(tsNow uint32, ws int, sack bool) uint32 {
	opts := uint32(cookieNoWS)
	if ws >= 0 {
		opts = uint32(ws)
	}
	if sack {
		opts |= cookieTSSACK
	}
	ts := tsNow&^cookieTSMask | opts
	if tsBefore(tsNow, ts) {
		ts -= 1 << cookieTSBits // never ahead of our clock: the peer's PAWS would drop what follows
	}
	return ts
}

// cookieTSOptions decodes what cookieTSVal put in tsecr: the peer's window
// shift (-1: none) and SACK-permitted (Linux's cookie_timestamp_decode).
func cookieTSOptions(tsecr uint32) (ws int, sack bool) {
	ws = int(tsecr & cookieNoWS)
	if ws > MaxWindowScale { // cookieNoWS
		ws = -1
	}
	return ws, tsecr&cookieTSSACK != 0
}
