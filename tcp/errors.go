package tcp

import "errors"

// Errors of the application calls and of connection failure. They can be matched
// with errors.Is; the stack wraps them in *net.OpError.
var (
	ErrConnectionReset   = errors.New("tcp: connection reset by peer")        // ECONNRESET
	ErrConnectionRefused = errors.New("tcp: connection refused")              // ECONNREFUSED: RST in SYN-SENT
	ErrTimeout           = errors.New("tcp: connection timed out")            // ETIMEDOUT: retries, user timeout, keepalive
	ErrClosed            = errors.New("tcp: use of closed connection")        // the application closed it
	ErrWriteClosed       = errors.New("tcp: write after CloseWrite")          // EPIPE
	ErrNotConnected      = errors.New("tcp: not connected")                   // ENOTCONN: before ESTABLISHED
	ErrAborted           = errors.New("tcp: connection aborted")              // ECONNABORTED: local Abort
	ErrInvalidConfig     = errors.New("tcp: invalid configuration")           // Config.Validate
	ErrBacklog           = errors.New("tcp: listen backlog full")             // SYN dropped
	ErrWheel             = errors.New("tcp: the timer wheel refused a timer") // wrapped wheel error
)

// Event is a set of notifications from an endpoint to the stack, so that it can
// wake the goroutines blocked on it.
type Event uint8

// Events. Several may come in one notification.
const (
	// EventReadable: Read will return data, io.EOF or an error.
	EventReadable Event = 1 << iota
	// EventWritable: Write will accept bytes or return an error.
	EventWritable
	// EventEstablished: the handshake completed.
	EventEstablished
	// EventError: the connection failed; Err returns why.
	EventError
	// EventClosed: the endpoint reached CLOSED, has stopped all its timers and
	// will send nothing more. The stack removes it from its demultiplexer.
	EventClosed
	// EventTimeWait: the endpoint is in TIME-WAIT and the application has
	// closed it: the stack may hand it over to a TimeWait record
	// (Endpoint.TimeWait), from its Notifier.
	EventTimeWait
)

func (e Event) String() string {
	names := []string{"Readable", "Writable", "Established", "Error", "Closed", "TimeWait"}
	s := ""
	for i, n := range names {
		if e&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}
