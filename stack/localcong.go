package stack

import (
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun"
)

// CongestedDevice is a device that can tell when its queue would drop a
// packet written now, as a Linux qdisc that is full or drops
// (NET_XMIT_DROP). With such a device the stack's TCP holds new data while
// Congested says yes, and retries it as Linux does after a local drop
// (tcp.LocalCongestion). No device of this module implements it (a TUN's
// queue is the kernel's, and a full one drops silently); the packetdrill
// shim's does, for scripts that install a qdisc that drops (tc ... pfifo
// limit 0).
type CongestedDevice interface {
	tun.Device
	Congested() bool
}

var _ tcp.LocalCongestion = (*output)(nil)

// Congested implements tcp.LocalCongestion: the device's answer, if it has
// one (CongestedDevice). TCP asks before every segment it sends: the
// device's type is asserted once (initOffload), not at each.
func (o *output) Congested(tcp.ID) bool {
	return o.cong != nil && o.cong.Congested()
}
