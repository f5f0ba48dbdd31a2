// Package record writes and reads tcpwheel's flight recordings: pcapng files
// that hold, beside every packet the stack handled and sent, what a replay
// needs to run the stack again exactly: the loop's timer expiries and input
// batches, the clock readings segments leave at, the ISNs and timestamp
// offsets, the accept queue's state, and the application's calls (listen,
// dial, write, read, close, ...), each at the instant the loop ran it.
//
// # Format
//
// One pcapng section (draft-ietf-opsawg-pcapng), little-endian:
//
//   - a Section Header Block and one Interface Description Block
//     (LINKTYPE_RAW: each packet a bare IP packet; if_tsresol 9:
//     nanoseconds), as gopacket's pcapgo.NgWriter writes them (the package
//     writes every block itself: it does not link gopacket);
//   - a custom block (type 0x00000BAD, PEN 32473) whose payload is 'H' and
//     the Header in JSON: the stack's configuration, the wheel's origin on
//     its clock, and the wall clock then;
//   - then, in the order the loop ran them: an Enhanced Packet Block per
//     packet, its direction in epb_flags (inbound: handled by the stack;
//     outbound: sent), its timestamp the instant on the stack's clock (Wall
//     plus T less Origin, exact to the nanosecond), and custom blocks of payload
//     'E', a version byte and the events between two packets, each a kind
//     byte and varint fields (event.go).
//
// tcpdump and Wireshark show the packets and skip the custom blocks, as the
// format asks of readers that do not know a PEN. PEN 32473 is RFC 5612's
// example number: a project-specific number would need registering with
// IANA.
//
// The Writer is called on the stack's loop, synchronously, and encodes into
// a 1 MiB buffer; a full buffer goes to a goroutine that writes it to the
// file, in order, while the loop fills the next (at most two buffers wait
// for the file: then the loop does). A failing writer stops the recording
// (the file ends at the last buffer written, or within the one that
// failed), never the stack. Its cost per packet: BenchmarkWriterPacket. The Reader checks every length against
// the block that holds it and names the block of any error.
package record
