// Package stack joins the pieces: IPv4 (with ICMP echo), demultiplexing by
// 4-tuple, the event loop that owns the timing wheel, and the public API
// (stack.New, Listen, DialContext) whose connections are net.Conn.
//
// It is being built under the stack issue; see DESIGN.md.
package stack
