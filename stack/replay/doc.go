// Package replay checks the stack against a pcap capture of one TCP connection
// between it and a peer.
//
// # Equality mode (Run)
//
// The capture, taken on the stack's side of the link (pcaptap, LINKTYPE_RAW),
// holds what the stack received and what it sent. Run builds a fresh manual
// stack (stack.NewManual, on a loop.Manual and a timer.ManualClock), injects
// the peer's packets at their recorded instants, performs the application's
// actions (a Script: from a JSON file beside the capture, or derived from the
// capture) at theirs, and compares every packet the stack sends with the
// recorded one, in order:
//
//   - flags, payload length and bytes, sequence and acknowledgment numbers
//     (printed relative to each side's ISN; the replay gives the stack the
//     recorded ISN, so they must be equal), the window field (exactly: the
//     replayed application reads at once, as the recorded one does, so the
//     window is deterministic), MSS, window scale, SACK-permitted, SACK blocks;
//   - timestamps: presence, TSecr exactly (the peer's TSvals are injected
//     unchanged), TSval loosely: its change since the stack's first TSval must
//     match within the tolerance in milliseconds, plus one for rounding;
//   - the instant: within one wheel tick plus Options.Tolerance of the
//     recorded one, on the capture's timeline. Inputs and application actions
//     happen at their recorded instants, so each output is measured from the
//     input or action that triggered it (or from the deadline that armed it:
//     the wheel re-arms timers from the deadline tick, not from the late
//     instant at which it ran), and errors do not accumulate. The tolerance
//     (DefaultTolerance, 2 ms) covers the recording's scheduling jitter: on the
//     recording machine the loop fires timers 0.1 to 1 ms after their
//     deadline, and an application's Write reaches the loop some tens of
//     microseconds after the instant the recorder noted.
//
// The first mismatch, and any packet missing or extra, is reported as a Diff
// naming the capture's packet number, what was expected and what was got.
//
// # Validity mode (Validate)
//
// A capture of two other stacks (the kernel on both sides) cannot be replayed
// for equality; Validate checks it for protocol validity only: it starts with
// a handshake, every ACK acknowledges only data that was sent, and data lies
// within the window that the receiver advertised.
//
// # Input
//
// ParseCapture reads classic pcap (micro- or nanosecond, either byte order)
// with link type RAW (101), IPV4 (228), Ethernet (1) or Linux cooked (113).
// Every packet must be IPv4/TCP of the same connection, and the first one a
// SYN; errors name the packet (numbered from 1, as tcpdump and Wireshark do).
package replay
