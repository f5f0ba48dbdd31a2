package stack

import (
	"errors"
	"net"
	"syscall"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// connError is a tcp error that also matches the errno a kernel socket gives for
// the same failure, so code written for net.TCPConn keeps working.
type connError struct {
	err   error
	errno syscall.Errno
}

func (e *connError) Error() string   { return e.err.Error() }
func (e *connError) Unwrap() []error { return []error{e.err, e.errno} }
func (e *connError) Timeout() bool   { return e.errno.Timeout() }
func (e *connError) Temporary() bool { return false }

var errnos = []struct {
	err   error
	errno syscall.Errno
}{
	// First: a timeout after a soft ICMP error (tcp/icmp.go) also matches
	// the soft error's, which may be a refusal; it is a timeout.
	{tcp.ErrTimeout, syscall.ETIMEDOUT},
	{tcp.ErrConnectionReset, syscall.ECONNRESET},
	{tcp.ErrConnectionRefused, syscall.ECONNREFUSED},
	{tcp.ErrWriteClosed, syscall.EPIPE},
	{tcp.ErrNotConnected, syscall.ENOTCONN},
	{tcp.ErrAborted, syscall.ECONNABORTED},
}

// mapErr turns an endpoint's error into the one the API returns.
func mapErr(err error) error {
	if errors.Is(err, tcp.ErrClosed) {
		return net.ErrClosed
	}
	for _, m := range errnos {
		if errors.Is(err, m.err) {
			return &connError{err: err, errno: m.errno}
		}
	}
	return err
}
