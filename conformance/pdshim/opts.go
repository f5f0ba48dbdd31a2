package pdshim

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"golang.org/x/sys/unix"
)

// linuxTCP is the stack's TCP configuration for a run: its defaults, but with
// the receive buffer of packetdrill's defaults.sh (tcp_rmem's maximum, 15 MB),
// from which Linux takes its window scale (8): the scripts' SYN-ACKs expect
// "wscale 8". Congestion control is CUBIC, Linux's default
// (net.ipv4.tcp_congestion_control), whose beta of 0.7 the fast recovery
// scripts assume (tcpi_snd_ssthresh, and what PRR sends).
func linuxTCP() tcp.Config {
	return tcp.Config{SendBuffer: shimSendBuffer, RecvBuffer: 15 << 20, CUBIC: true, LinuxRTO: true, PushPolicy: tcp.PushLinux}
}

// shimSendBuffer is the send buffer of a socket whose script sets no
// SO_SNDBUF: 256 KB, the library's default until it grew to 512 KB for bulk
// throughput (tcp.DefaultSendBuffer), which the scripts' expectations were
// checked against.
const shimSendBuffer = 256 << 10

// sockOpts are a socket's options; those set before listen or connect go
// into the TCP configuration of its connections (tcpConfig).
type sockOpts struct {
	mss         int // TCP_MAXSEG; 0: the device's
	sndbuf      int // SO_SNDBUF as set (Linux doubles it); 0: default
	rcvbuf      int // SO_RCVBUF as set; 0: default
	nodelay     bool
	keepalive   bool
	keepIdle    time.Duration
	keepIntvl   time.Duration
	keepCnt     int
	userTimeout time.Duration
	lingerZero  bool // SO_LINGER on with 0 s: close resets
}

func defaultOpts() sockOpts { return sockOpts{} }

// tcpConfig is the TCP configuration for a socket's connections: the run's,
// with the sysctls the script set and the socket's options.
func (s *Shim) tcpConfig(o sockOpts) tcp.Config {
	cfg := linuxTCP()
	s.sysctls.apply(&cfg)
	cfg.MSS = o.mss
	if o.sndbuf > 0 {
		cfg.SendBuffer = 2 * o.sndbuf
	}
	if o.rcvbuf > 0 {
		cfg.RecvBuffer = 2 * o.rcvbuf
	}
	cfg.KeepAlive = o.keepalive
	cfg.KeepIdle, cfg.KeepInterval, cfg.KeepCount = o.keepIdle, o.keepIntvl, o.keepCnt
	cfg.UserTimeout = o.userTimeout
	cfg.Nagle = !o.nodelay // Linux's sockets have Nagle on until TCP_NODELAY
	return cfg
}

// applyConnOpts applies to a connection the options that can change after
// the handshake began.
func (s *Shim) applyConnOpts(k *sock) {
	if k.c == nil {
		return
	}
	_ = k.c.SetKeepAlive(k.opts.keepalive)
}

// optInt reads an int option value (at least 4 bytes).
func optInt(val []byte) (int, error) {
	if len(val) < 4 {
		return 0, syscall.EINVAL
	}
	return int(int32(binary.NativeEndian.Uint32(val))), nil
}

// putInt writes an int option value and returns its length.
func putInt(val []byte, v int) (int, error) {
	if len(val) < 4 {
		return 0, syscall.EINVAL
	}
	binary.NativeEndian.PutUint32(val, uint32(int32(v)))
	return 4, nil
}

// optName names an option for the "unsupported" message.
func optName(level, name int) string {
	names := map[[2]int]string{
		{unix.SOL_TCP, unix.TCP_INFO}:              "TCP_INFO",
		{unix.SOL_TCP, unix.TCP_CONGESTION}:        "TCP_CONGESTION",
		{unix.SOL_TCP, unix.TCP_CORK}:              "TCP_CORK",
		{unix.SOL_TCP, unix.TCP_FASTOPEN}:          "TCP_FASTOPEN",
		{unix.SOL_TCP, unix.TCP_NOTSENT_LOWAT}:     "TCP_NOTSENT_LOWAT",
		{unix.SOL_SOCKET, unix.SO_ZEROCOPY}:        "SO_ZEROCOPY",
		{unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE}: "SO_MAX_PACING_RATE",
	}
	if n, ok := names[[2]int{level, name}]; ok {
		return n
	}
	return fmt.Sprintf("socket option level %d name %d", level, name)
}

// Setsockopt sets the options the portable scripts use; others fail with
// ENOSYS ("unsupported: NAME" on stderr).
func (s *Shim) Setsockopt(fd, level, name int, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return err
	}
	if level == unix.SOL_SOCKET && name == unix.SO_LINGER {
		if len(val) < 8 {
			return syscall.EINVAL
		}
		on := binary.NativeEndian.Uint32(val) != 0
		secs := binary.NativeEndian.Uint32(val[4:])
		k.opts.lingerZero = on && secs == 0
		return nil
	}
	v, err := optInt(val)
	if err != nil {
		return err
	}
	o := &k.opts
	switch [2]int{level, name} {
	case [2]int{unix.SOL_SOCKET, unix.SO_REUSEADDR}, [2]int{unix.SOL_SOCKET, unix.SO_REUSEPORT}:
		return nil // the stack binds a port in use by TIME-WAIT as RFC 6191 allows
	case [2]int{unix.SOL_SOCKET, unix.SO_SNDBUF}:
		o.sndbuf = max(v, 2304) // Linux's SOCK_MIN_SNDBUF/2
		if k.c != nil {
			return errno(k.c.SetSendBuffer(2 * o.sndbuf))
		}
		return s.started(k, "SO_SNDBUF")
	case [2]int{unix.SOL_SOCKET, unix.SO_RCVBUF}:
		o.rcvbuf = max(v, 1152) // Linux's SOCK_MIN_RCVBUF/2
		return s.started(k, "SO_RCVBUF")
	case [2]int{unix.SOL_SOCKET, unix.SO_KEEPALIVE}:
		o.keepalive = v != 0
		s.applyConnOpts(k)
		return nil
	case [2]int{unix.SOL_TCP, unix.TCP_NODELAY}:
		o.nodelay = v != 0
		if k.c != nil {
			return errno(k.c.SetNoDelay(o.nodelay))
		}
		return s.started(k, "TCP_NODELAY")
	case [2]int{unix.SOL_TCP, unix.TCP_MAXSEG}:
		if v < 88 || v > 65535 {
			return syscall.EINVAL
		}
		o.mss = v
		return s.started(k, "TCP_MAXSEG")
	case [2]int{unix.SOL_TCP, unix.TCP_USER_TIMEOUT}:
		if v < 0 {
			return syscall.EINVAL
		}
		o.userTimeout = time.Duration(v) * time.Millisecond
		if k.c != nil {
			return errno(k.c.SetUserTimeout(o.userTimeout))
		}
		return s.started(k, "TCP_USER_TIMEOUT")
	case [2]int{unix.SOL_TCP, unix.TCP_KEEPIDLE}, [2]int{unix.SOL_TCP, unix.TCP_KEEPINTVL}, [2]int{unix.SOL_TCP, unix.TCP_KEEPCNT}:
		if v < 1 {
			return syscall.EINVAL
		}
		switch name {
		case unix.TCP_KEEPIDLE:
			o.keepIdle = time.Duration(v) * time.Second
		case unix.TCP_KEEPINTVL:
			o.keepIntvl = time.Duration(v) * time.Second
		default:
			o.keepCnt = v
		}
		if k.c != nil {
			return s.unsupported(optName(level, name) + " on a connection (set it before connect or listen)")
		}
		return nil
	}
	return s.unsupported("setsockopt " + optName(level, name))
}

// started applies an option that new connections take: to those a listener
// accepts from now on; on a connection it is unsupported.
func (s *Shim) started(k *sock, name string) error {
	switch {
	case k.c != nil:
		return s.unsupported(name + " on a connection (set it before connect or listen)")
	case k.ln != nil:
		return errno(k.ln.SetTCPConfig(s.tcpConfig(k.opts)))
	}
	return nil
}

// Getsockopt returns the options the portable scripts read; it writes the
// value into val and returns its length.
func (s *Shim) Getsockopt(fd, level, name int, val []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return 0, err
	}
	o := k.opts
	switch [2]int{level, name} {
	case [2]int{unix.SOL_SOCKET, unix.SO_ERROR}:
		if k.c != nil {
			settle(k)
		}
		v := 0
		if e, ok := k.soErr.(syscall.Errno); ok {
			v = int(e)
		}
		k.soErr = nil
		return putInt(val, v)
	case [2]int{unix.SOL_SOCKET, unix.SO_TYPE}:
		return putInt(val, unix.SOCK_STREAM)
	case [2]int{unix.SOL_SOCKET, unix.SO_SNDBUF}:
		return putInt(val, s.tcpConfigBuf(o.sndbuf, linuxTCP().SendBuffer))
	case [2]int{unix.SOL_SOCKET, unix.SO_RCVBUF}:
		return putInt(val, s.tcpConfigBuf(o.rcvbuf, linuxTCP().RecvBuffer))
	case [2]int{unix.SOL_SOCKET, unix.SO_KEEPALIVE}:
		return putInt(val, b2i(o.keepalive))
	case [2]int{unix.SOL_TCP, unix.TCP_NODELAY}:
		return putInt(val, b2i(o.nodelay))
	case [2]int{unix.SOL_TCP, unix.TCP_MAXSEG}:
		switch {
		case k.c != nil:
			return putInt(val, k.c.Info().SndMSS)
		case o.mss > 0:
			return putInt(val, o.mss)
		}
		return putInt(val, 536) // Linux's TCP_MSS_DEFAULT before a connection
	case [2]int{unix.SOL_TCP, unix.TCP_USER_TIMEOUT}:
		return putInt(val, int(o.userTimeout/time.Millisecond))
	case [2]int{unix.SOL_TCP, unix.TCP_INFO}:
		if k.c == nil {
			return 0, s.unsupported("TCP_INFO on a socket without a connection")
		}
		advmss := o.mss
		if advmss == 0 {
			advmss = 1460
		}
		return tcpInfo(val, k.c, advmss), nil
	case [2]int{unix.SOL_TCP, unix.TCP_CC_INFO}, [2]int{unix.SOL_SOCKET, unix.SO_MEMINFO}:
		// packetdrill reads both for every code event; NewReno has no
		// TCP_CC_INFO of its own (Linux reports zeros for it too), and the
		// stack keeps no kernel memory accounting: zeros.
		clear(val)
		return len(val), nil
	}
	return 0, s.unsupported("getsockopt " + optName(level, name))
}

// tcpConfigBuf is SO_SNDBUF or SO_RCVBUF as Linux reports it: twice the value
// set, or the default.
func (s *Shim) tcpConfigBuf(set, def int) int {
	if set > 0 {
		return 2 * set
	}
	return def
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sysctls are the Linux sysctls a script set with its shell commands (run
// against stand-ins in so mode: see scripts/conformance.sh), read from a file
// of name=value lines. The TCP ones with a counterpart in tcp.Config apply to
// the connections started after.
type sysctls struct {
	path string
	vals map[string]string
}

func (c *sysctls) load() {
	if c.path == "" {
		return
	}
	f, err := os.Open(c.path)
	if err != nil {
		return // no command has run yet
	}
	defer f.Close()
	c.vals = make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), "=")
		if ok {
			c.vals[strings.TrimSpace(name)] = strings.TrimSpace(val)
		}
	}
}

func (c *sysctls) on(name string) (on, set bool) {
	v, ok := c.vals[name]
	if !ok {
		return false, false
	}
	n, err := strconv.Atoi(v)
	return err == nil && n != 0, err == nil
}

func (c *sysctls) apply(cfg *tcp.Config) {
	if on, set := c.on("net.ipv4.tcp_timestamps"); set {
		cfg.DisableTimestamps = !on
	}
	if on, set := c.on("net.ipv4.tcp_sack"); set {
		cfg.DisableSACK = !on
	}
	if on, set := c.on("net.ipv4.tcp_window_scaling"); set {
		cfg.DisableWindowScale = !on
	}
	if on, set := c.on("net.ipv4.tcp_slow_start_after_idle"); set {
		cfg.SlowStartAfterIdle = on
	}
	if n, err := strconv.Atoi(c.vals["net.ipv4.tcp_min_tso_segs"]); err == nil && n > 0 {
		cfg.TSOMinSegs = n
	}
}
