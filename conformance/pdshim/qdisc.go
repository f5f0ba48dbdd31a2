package pdshim

import (
	"os"
	"time"
)

// qdisc is the root qdisc of the stack's device as the script's tc commands
// left it. In so mode tc is the runner's stand-in (scripts/conformance.sh),
// which records "tc.qdisc.root=drop" in the run's sysctls file for a qdisc
// that drops every packet (pfifo or bfifo with limit 0, as
// user-timeout-probe installs) and "tc.qdisc.root=none" when the root
// qdisc is deleted; other qdiscs are not modelled (they pass everything).
// While the qdisc drops, the device discards what the stack writes and says
// so to the stack (Congested: stack.CongestedDevice), as Linux's
// dev_queue_xmit reports NET_XMIT_DROP to TCP.
type qdisc struct {
	path  string
	size  int64 // the file's size and time when last read
	mtime time.Time
	drop  bool
	ctl   sysctls
}

// dropping reports whether the qdisc drops everything now, reading the file
// again when it changed.
func (q *qdisc) dropping() bool {
	if q == nil || q.path == "" {
		return false
	}
	fi, err := os.Stat(q.path)
	if err != nil {
		q.drop = false
		return false
	}
	if fi.Size() != q.size || !fi.ModTime().Equal(q.mtime) {
		q.size, q.mtime = fi.Size(), fi.ModTime()
		q.ctl.path = q.path
		q.ctl.load()
		q.drop = q.ctl.vals["tc.qdisc.root"] == "drop"
	}
	return q.drop
}

// Congested implements stack.CongestedDevice.
func (d *queueDev) Congested() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.qdisc.dropping()
}
