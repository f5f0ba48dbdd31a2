package tcp

// State is a connection state (RFC 9293 3.3.2).
type State uint8

// The states of RFC 9293 3.3.2. LISTEN is the Listener's.
const (
	StateClosed State = iota
	StateListen
	StateSynSent
	StateSynReceived
	StateEstablished
	StateFinWait1
	StateFinWait2
	StateCloseWait
	StateClosing
	StateLastAck
	StateTimeWait
)

var stateNames = [...]string{"CLOSED", "LISTEN", "SYN-SENT", "SYN-RECEIVED", "ESTABLISHED", "FIN-WAIT-1", "FIN-WAIT-2", "CLOSE-WAIT", "CLOSING", "LAST-ACK", "TIME-WAIT"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(?)"
}

// canSend reports whether new data may be sent: our FIN is not yet queued.
func (s State) canSend() bool { return s == StateEstablished || s == StateCloseWait }

// canSendData reports whether segments of the send queue (data, FIN) may go
// out: the states in which output sends.
func (s State) canSendData() bool {
	switch s {
	case StateEstablished, StateCloseWait, StateFinWait1, StateClosing, StateLastAck:
		return true
	}
	return false
}

// canReceive reports whether the peer may still send data: no FIN received.
func (s State) canReceive() bool {
	return s == StateEstablished || s == StateFinWait1 || s == StateFinWait2
}
