package stack

import (
	"net/netip"
	"time"
)

// icmpLimiter is the rate limit of the ICMP errors the stack sends, as
// Linux's: a global token bucket (icmp_msgs_per_sec 1000, icmp_msgs_burst
// 50) and one per destination (icmp_ratelimit: one error a second, in
// bursts of up to 6, inet_peer's XRLIM_BURST_FACTOR). Both run on the
// wheel's Now, so that a replay limits exactly as the recorded stack did.
// It runs on the loop.
type icmpLimiter struct {
	started bool
	tokens  int           // global tokens
	last    time.Duration // when the global tokens were last counted
	// peers are the destinations' buckets, each in time: an error costs
	// icmpPeerInterval, the bucket holds icmpPeerBurst of them. A full
	// bucket is as good as none, so at most icmpMaxPeers are kept and the
	// full ones make room (whatever the map's order: the same ones go).
	peers map[netip.Addr]peerBucket
}

type peerBucket struct {
	tokens, last time.Duration
}

const (
	icmpInterval     = time.Second / 1000 // icmp_msgs_per_sec
	icmpBurst        = 50                 // icmp_msgs_burst
	icmpPeerInterval = time.Second        // icmp_ratelimit
	icmpPeerBurst    = 6 * icmpPeerInterval
	icmpMaxPeers     = 4096
)

// allow reports whether an ICMP error to dst may be sent at now, and takes
// its tokens if so.
func (l *icmpLimiter) allow(now time.Duration, dst netip.Addr) bool {
	if !l.started {
		l.started, l.tokens, l.last, l.peers = true, icmpBurst, now, make(map[netip.Addr]peerBucket)
	}
	if add := (now - l.last) / icmpInterval; add > 0 {
		l.tokens = min(icmpBurst, l.tokens+int(add))
		l.last += add * icmpInterval
	}
	if l.tokens == 0 {
		return false
	}
	b, ok := l.peers[dst]
	if !ok {
		if len(l.peers) >= icmpMaxPeers {
			for a, p := range l.peers {
				if now-p.last >= icmpPeerBurst {
					delete(l.peers, a)
				}
			}
			if len(l.peers) >= icmpMaxPeers {
				return false // as many destinations limited right now: this one too
			}
		}
		b = peerBucket{tokens: icmpPeerBurst, last: now}
	}
	b.tokens = min(icmpPeerBurst, b.tokens+now-b.last)
	b.last = now
	if b.tokens < icmpPeerInterval {
		l.peers[dst] = b
		return false
	}
	b.tokens -= icmpPeerInterval
	l.peers[dst] = b
	l.tokens--
	return true
}
