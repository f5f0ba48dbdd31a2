package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// Script is what the capture does not show: how the stack was configured and
// what its application did. The recorder writes it as JSON beside the
// capture (FILE.pcap -> FILE.json); without one, DeriveScript infers it.
type Script struct {
	Description string `json:"description,omitempty"`
	// Stack is the stack's address; empty means the receiver of the first SYN.
	Stack string `json:"stack,omitempty"`
	// Closed: the stack had no listener on the port (a passive capture only).
	Closed bool     `json:"closed,omitempty"`
	Tick   Duration `json:"tick,omitempty"` // the wheel's tick; zero means timer.DefaultTick
	MTU    int      `json:"mtu,omitempty"`  // the device's MTU; zero means 1500
	TCP    TCP      `json:"tcp"`
	// ExplicitReads: the application's reads are actions. Otherwise it reads
	// whatever arrives at once, which may send window updates and change the
	// advertised windows from those of an application that reads later.
	ExplicitReads bool `json:"explicit_reads,omitempty"`
	// Actions are the application's calls, in order.
	Actions []Action `json:"actions,omitempty"`
}

// TCP is the part of tcp.Config a recording may set. Zero fields are the
// defaults.
type TCP struct {
	MSS          int      `json:"mss,omitempty"`
	SendBuffer   int      `json:"send_buffer,omitempty"`
	RecvBuffer   int      `json:"recv_buffer,omitempty"`
	InitialRTO   Duration `json:"initial_rto,omitempty"`
	MinRTO       Duration `json:"min_rto,omitempty"`
	SYNRetries   int      `json:"syn_retries,omitempty"`
	Retries2     int      `json:"retries2,omitempty"`
	KeepAlive    bool     `json:"keepalive,omitempty"`
	KeepIdle     Duration `json:"keep_idle,omitempty"`
	KeepInterval Duration `json:"keep_interval,omitempty"`
	KeepCount    int      `json:"keep_count,omitempty"`
	DelayedACK   Duration `json:"delayed_ack,omitempty"`
	TimeWait     Duration `json:"time_wait,omitempty"`
	FinWait2     Duration `json:"fin_wait2,omitempty"`
}

// Config returns the tcp.Config the fields describe.
func (t TCP) Config() tcp.Config {
	return tcp.Config{
		MSS: t.MSS, SendBuffer: t.SendBuffer, RecvBuffer: t.RecvBuffer,
		InitialRTO: time.Duration(t.InitialRTO), MinRTO: time.Duration(t.MinRTO),
		SYNRetries: t.SYNRetries, Retries2: t.Retries2,
		KeepAlive: t.KeepAlive, KeepIdle: time.Duration(t.KeepIdle),
		KeepInterval: time.Duration(t.KeepInterval), KeepCount: t.KeepCount,
		DelayedACK: time.Duration(t.DelayedACK), TimeWait: time.Duration(t.TimeWait),
		FinWait2: time.Duration(t.FinWait2),
	}
}

// Action operations.
const (
	OpWrite      = "write"      // write the next N bytes of the stack's stream
	OpClose      = "close"      // Conn.Close
	OpCloseWrite = "closewrite" // Conn.CloseWrite
	OpAbort      = "abort"      // Conn.Abort: a RST
	OpRead       = "read"       // a Read that returned N bytes (with Script.ExplicitReads)
)

// Action is one application call on the connection. The application accepts
// the connection as soon as it is established, so that is no action.
type Action struct {
	// T is the instant of the call on the capture's clock: nanoseconds since
	// the Unix epoch, as the pcap timestamps.
	T  int64  `json:"t"`
	Op string `json:"op"`
	// N is the byte count of a write or a read. The bytes written are the stack's stream as the
	// capture shows it.
	N int `json:"n,omitempty"`
}

// Duration is a time.Duration written as "200ms" in JSON.
type Duration = record.Duration

// ScriptPath is where the script of the capture at path lives.
func ScriptPath(path string) string {
	return strings.TrimSuffix(strings.TrimSuffix(path, ".pcapng"), ".pcap") + ".json"
}

// LoadScript reads a script; a missing file is (nil, nil).
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s Script
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("replay: script %s: %w", path, err)
	}
	for i, a := range s.Actions {
		switch a.Op {
		case OpWrite, OpClose, OpCloseWrite, OpAbort, OpRead:
		default:
			return nil, fmt.Errorf("replay: script %s: action %d: unknown op %q", path, i+1, a.Op)
		}
		if a.N < 0 || (a.Op == OpWrite || a.Op == OpRead) != (a.N > 0) {
			return nil, fmt.Errorf("replay: script %s: action %d: bad byte count %d for %s", path, i+1, a.N, a.Op)
		}
	}
	return &s, nil
}

// DeriveScript infers a script from a capture: default configuration but
// the MTU and the receive buffer (from the stack's MSS and window scale
// options), a write
// of the new bytes at the instant of each stack segment that carries data not
// sent before, and a Close at the stack's first FIN. It cannot see
// configuration (keepalive, timer values) or writes held back by the window:
// a zero-window probe needs the data written before it, so write a script for
// such captures.
func DeriveScript(sess *Session) *Script {
	sc := &Script{Stack: sess.Stack.Addr().String()}
	if !sess.HasStackISN {
		sc.Closed = sess.Passive
		return sc
	}
	written := uint32(0) // relative to ISN+1
	for i, p := range sess.Packets {
		if !sess.FromStack[i] {
			continue
		}
		rel := uint32(p.Seg.Seq-sess.StackISN) - 1
		if p.Seg.Flags&tcp.FlagSYN != 0 {
			rel = 0
			if o := p.Seg.Options; o.HasMSS && o.MSS >= 28 {
				sc.MTU = int(o.MSS) + 40 // the stack announces its MTU less 40
			}
			if o := p.Seg.Options; o.HasWS && o.WindowScale >= 1 && o.WindowScale <= 14 {
				// The receive buffer: the power of two whose window shift
				// the stack announced (the default, 1 MB, has 5; captures
				// made before 2026-11-24 had 256 KB, shift 3).
				sc.TCP.RecvBuffer = 1 << (15 + int(o.WindowScale))
			}
		}
		if end := rel + uint32(len(p.Seg.Payload)); len(p.Seg.Payload) > 0 && int32(end-written) > 0 {
			sc.Actions = append(sc.Actions, Action{T: p.Time.UnixNano(), Op: OpWrite, N: int(end - written)})
			written = end
		}
		if p.Seg.Flags&tcp.FlagFIN != 0 {
			sc.Actions = append(sc.Actions, Action{T: p.Time.UnixNano(), Op: OpClose})
			break
		}
	}
	return sc
}

// stream returns the stack's outgoing bytes as the capture shows them, by
// position after the SYN; bytes the capture never shows are zero.
func stream(sess *Session) []byte {
	var b []byte
	for i, p := range sess.Packets {
		if !sess.FromStack[i] || len(p.Seg.Payload) == 0 || !sess.HasStackISN {
			continue
		}
		rel := int(uint32(p.Seg.Seq-sess.StackISN) - 1)
		if p.Seg.Flags&tcp.FlagSYN != 0 {
			rel = 0
		}
		if rel < 0 || rel > 1<<26 {
			continue // implausible: beyond what a replay writes
		}
		if need := rel + len(p.Seg.Payload); need > len(b) {
			b = append(b, make([]byte, need-len(b))...)
		}
		copy(b[rel:], p.Seg.Payload)
	}
	return b
}

// Open reads the capture at path and the script beside it (nil if there is
// none) and splits the capture into a session. stackAddr names the stack; the
// zero Addr means the script's, else the receiver of the first SYN.
func Open(path string, stackAddr netip.Addr) (*Session, *Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	pkts, err := ParseCapture(bufio.NewReader(f))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	sc, err := LoadScript(ScriptPath(path))
	if err != nil {
		return nil, nil, err
	}
	if !stackAddr.IsValid() && sc != nil && sc.Stack != "" {
		if stackAddr, err = netip.ParseAddr(sc.Stack); err != nil {
			return nil, nil, fmt.Errorf("replay: script %s: stack address: %w", ScriptPath(path), err)
		}
	}
	sess, err := NewSession(pkts, stackAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return sess, sc, nil
}
