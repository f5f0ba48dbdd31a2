package stack

import (
	"net/netip"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// The path MTU cache: what "fragmentation needed" (RFC 1191) and "packet
// too big" (RFC 8201) taught one connection about a destination, its next
// connections start with, as Linux's route exceptions do (its
// ip_rt_mtu_expires, 10 minutes). Without it, each new connection to a
// destination behind a smaller MTU loses its first full-sized segments and
// an RTT to the same ICMP error. Only an error whose quoted sequence number
// the connection checked (RFC 5927 4.1) is kept. An entry is forgotten 10
// minutes after it was last learned (RFC 1191 6.3, RFC 8201 4: then the
// path may carry more again); the cache holds at most pmtuMax
// destinations (a full cache drops the expired, else one entry). With
// several loops, each keeps its own (the loop of the connection the error
// quoted).

const (
	pmtuLifetime = 10 * time.Minute
	pmtuMax      = 4096
)

type pmtuEntry struct {
	mtu int
	at  time.Duration // when it was learned, on the wheel's clock
}

type pmtuCache map[netip.Addr]pmtuEntry

// learn keeps mtu for dst, learned now, unless a smaller one is kept.
func (s *Stack) learnPMTU(dst netip.Addr, mtu int) {
	now := s.wheel.Now()
	if e, ok := s.pmtu[dst]; ok && e.mtu <= mtu && now-e.at < pmtuLifetime {
		return
	}
	if s.pmtu == nil {
		s.pmtu = make(pmtuCache)
	}
	if _, ok := s.pmtu[dst]; !ok && len(s.pmtu) >= pmtuMax {
		for a, e := range s.pmtu {
			if now-e.at >= pmtuLifetime {
				delete(s.pmtu, a)
			}
		}
		for a := range s.pmtu {
			if len(s.pmtu) < pmtuMax {
				break
			}
			delete(s.pmtu, a)
		}
	}
	s.pmtu[dst] = pmtuEntry{mtu: mtu, at: now}
	s.counters.PMTULearned++
}

// applyPMTU starts a new connection's endpoint with the path MTU kept for
// its remote address, if any.
func (s *Stack) applyPMTU(ep *tcp.Endpoint) {
	if len(s.pmtu) == 0 {
		return
	}
	dst := ep.ID().Remote.Addr()
	e, ok := s.pmtu[dst]
	if !ok {
		return
	}
	if s.wheel.Now()-e.at >= pmtuLifetime {
		delete(s.pmtu, dst)
		return
	}
	ep.LimitPathMTU(e.mtu)
	s.counters.PMTUReused++
}
