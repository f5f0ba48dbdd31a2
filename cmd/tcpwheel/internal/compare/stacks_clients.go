package compare

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/baseline/gvisor"
	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/compare/segwatch"
	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/tun"
)

// The stacks that take part only in the real-client scenarios: the kernel
// (the ceiling) and gVisor in its best configuration on a TUN. Neither sits
// on the bed's device chain (no watcher, no impairment, no pcap tap): the
// kernel has no TUN in the path at all, and gvisor-gso's TUN carries
// virtio-net headers and 64 KB segments that the chain does not parse.

// clientOnly reports whether the named stack runs only the real-client
// scenarios.
func clientOnly(stack string) bool { return stack == stackKernel || stack == stackGVisorGSO }

// runs reports whether the named stack takes part in scenario sc.
func runs(stack string, sc *scenario) bool { return sc.clients || !clientOnly(stack) }

// errKernelDial: the kernel stack only serves.
var errKernelDial = errors.New("the kernel stack does not dial: it takes part only in the real-client scenarios")

// kernelStack is the HTTP server on kernel sockets, listening on the loopback
// of the run's namespace, where the clients connect: the kernel's own
// loopback, the ceiling, measured in the same run as the other stacks. bed
// nil: this process runs inside the namespace (a server child).
type kernelStack struct{ bed *testbed.Bed }

func (k *kernelStack) Listen(port int) (net.Listener, error) {
	listen := func() (ln net.Listener, err error) {
		return net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	if k.bed == nil {
		return listen()
	}
	var ln net.Listener
	err := k.bed.Do(func() (err error) {
		ln, err = listen()
		return err
	})
	return ln, err
}

// ClientAddr implements clientAddresser: the namespace's loopback.
func (k *kernelStack) ClientAddr() netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, 1}) }

func (k *kernelStack) Dial(context.Context, int) (net.Conn, error) { return nil, errKernelDial }
func (k *kernelStack) Sample(net.Conn) segwatch.Sample             { return segwatch.Sample{} }
func (k *kernelStack) SetKeepAlive(net.Conn, net.KeepAliveConfig) error {
	return errKernelDial
}
func (k *kernelStack) Timers() (timerCounts, bool) { return timerCounts{}, false }
func (k *kernelStack) ListenCounts() listenCounts  { return listenCounts{} }

// InputPath implements stackUnderTest: the kernel's own.
func (k *kernelStack) InputPath() string { return "kernel" }
func (k *kernelStack) Close() error      { return nil }

// newGVisorGSO starts gVisor in its best configuration on a TUN of its own
// inside the bed's namespace, opened with IFF_VNET_HDR and offloads
// (gvisor.OpenVnetTUN: host GSO out, the kernel's TSO segments in, see
// internal/baseline/gvisor/gso.go), which takes the kernel's address from the
// bed's TUN; with the TCP tuning of gVisor's throughput users (gvisor.Config.Tuned:
// receive-buffer auto-tuning, larger buffers).
//
// backlog > 0 is its listeners' backlog (gvisor.Config.ListenBacklog).
func newGVisorGSO(bed *testbed.Bed, backlog int) (stackUnderTest, error) {
	vt, err := gvisor.OpenVnetTUNOn(bed, "twc", tun.DefaultMTU)
	if err != nil {
		return nil, err
	}
	return startGVisorGSO(vt, bed.StackAddr, bed.KernelAddr, backlog)
}

// startGVisorGSO is gvisor-gso's stack on vt, at addr, whose Dial reaches
// the kernel at kernel. It owns vt, and closes it on an error.
func startGVisorGSO(vt *gvisor.VnetTUN, addr, kernel netip.Addr, backlog int) (stackUnderTest, error) {
	s, err := gvisor.New(gvisor.Config{VnetTUN: vt, Addr: addr, Tuned: true, ListenBacklog: backlog})
	if err != nil {
		vt.Close() // New closes it on some failures only; a second Close is harmless
		return nil, err
	}
	return &gvisorStack{s: s, kernel: kernel}, nil
}
