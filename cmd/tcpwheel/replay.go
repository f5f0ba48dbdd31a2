package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/stack/replay"
)

// cmdReplay is `tcpwheel replay`: it replays a capture against a fresh stack on
// the manual clock and compares (-mode equal), or checks the capture for
// protocol validity only (-mode validate). A mismatch or bad input is an
// error: exit status 1.
func cmdReplay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tcpwheel replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "equal", "equal: replay against the stack and compare; validate: check validity only (any two stacks)")
	stackAddr := fs.String("stack", "", "the stack's address in the capture (default: the script's, else the receiver of the first SYN)")
	scriptPath := fs.String("script", "", "the replay script (default: FILE.json beside FILE.pcap if present, else derived from the capture)")
	tol := fs.Duration("tolerance", replay.DefaultTolerance, "how far, beyond one tick, a segment's instant may be from the recorded one (pcap files)")
	conn := fs.String("conn", "", "a flight recording's connection to report: its number (from 1) or ADDR:PORT-ADDR:PORT (default: all)")
	list := fs.Bool("list", false, "list a flight recording's connections and stop")
	events := fs.Bool("events", false, "print a flight recording's events, one a line (packets with their TCP header), and stop")
	update := fs.Bool("update", false, "rewrite the flight recording FILE with the replay's own recording (after a deliberate change of behaviour)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tcpwheel replay [flags] FILE\n\nReplays a capture on a manual clock and compares what the stack sends with\nwhat was recorded. FILE is a flight recording (pcapng, as tcpwheel run -pcap\nwrites it): every connection is replayed exactly, and reported one by one.\nOr a pcap (or other pcapng) file of one TCP connection between tcpwheel and a\npeer: the application is derived from it, or taken from a JSON script.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: replay: want one capture file, got %d arguments", errUsage, fs.NArg())
	}
	if *mode != "equal" && *mode != "validate" {
		return fmt.Errorf("%w: replay: -mode %q is not equal or validate", errUsage, *mode)
	}
	if *tol < 0 {
		return fmt.Errorf("%w: replay: -tolerance %v is negative", errUsage, *tol)
	}
	var addr netip.Addr
	if *stackAddr != "" {
		a, err := netip.ParseAddr(*stackAddr)
		if err != nil || !a.Is4() {
			return fmt.Errorf("%w: replay: -stack %q is not an IPv4 address", errUsage, *stackAddr)
		}
		addr = a
	}
	path := fs.Arg(0)
	isRec, err := replay.IsRecording(path)
	if err != nil {
		return err
	}
	if isRec {
		if rec, err := replay.OpenRecording(path); err == nil {
			if *mode != "equal" || *stackAddr != "" || *scriptPath != "" {
				return fmt.Errorf("%w: replay: a flight recording takes no -mode, -stack or -script", errUsage)
			}
			if *events {
				for i := range rec.Events {
					fmt.Fprintln(stdout, replay.Describe(&rec.Events[i]))
				}
				return nil
			}
			return replayRecording(path, rec, *conn, *list, *update, stdout)
		} else if !errors.Is(err, replay.ErrNotRecording) {
			return err
		}
	}
	if *conn != "" || *list || *update || *events {
		return fmt.Errorf("%w: replay: -conn, -list, -events and -update are for flight recordings; %s is not one", errUsage, path)
	}
	sess, sc, err := replay.Open(path, addr)
	if err != nil {
		return err
	}
	if *scriptPath != "" {
		if sc, err = replay.LoadScript(*scriptPath); err != nil {
			return err
		}
		if sc == nil {
			return fmt.Errorf("replay: script %s does not exist", *scriptPath)
		}
	}
	fmt.Fprintf(stdout, "%s: %d packets, stack %v, peer %v\n", path, len(sess.Packets), sess.Stack, sess.Peer)
	if *mode == "validate" {
		if err := replay.Validate(sess); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "valid")
		return nil
	}
	if sc == nil {
		fmt.Fprintln(stdout, "no script: deriving the application's writes and close from the capture")
	}
	start := time.Now()
	res, err := replay.Run(sess, replay.Options{Script: sc, Tolerance: *tol})
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "match: %d packets from the stack, same flags, numbers, options and instants (within a tick + %v); replayed in %v\n",
		res.Expected, *tol, time.Since(start).Round(time.Microsecond))
	return nil
}

// replayRecording replays a flight recording and reports per connection.
func replayRecording(path string, rec *record.Recording, conn string, list, update bool, stdout io.Writer) error {
	cs := replay.Conns(rec)
	h := rec.Header
	fmt.Fprintf(stdout, "%s: flight recording of %v (MTU %d, tick %v), %d events, %d connections\n",
		path, h.Addr, h.MTU, time.Duration(h.Tick), len(rec.Events), len(cs))
	if list {
		for _, c := range cs {
			fmt.Fprintf(stdout, "  %d  %v <-> %v  %d packets sent, %d handled\n", c.N, c.Local, c.Remote, c.Sent, c.Handled)
		}
		return nil
	}
	var re bytes.Buffer
	opt := replay.ReplayOptions{Conn: conn}
	if update {
		opt.Rerecord = &re
	}
	r, err := replay.Replay(rec, opt)
	if errors.Is(err, replay.ErrConn) {
		return fmt.Errorf("%w: -conn: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	for _, c := range r.Conns {
		status := "exact"
		if len(c.Diffs) > 0 {
			status = fmt.Sprintf("DIFFERS (%d packets)", len(c.Diffs))
		}
		fmt.Fprintf(stdout, "  %d  %v <-> %v  %d packets sent, %d replayed: %s\n", c.N, c.Local, c.Remote, c.Sent, c.Got, status)
	}
	if update {
		if err := os.WriteFile(path, re.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "updated %s with the replay's recording (%d bytes)\n", path, re.Len())
		return nil
	}
	if err := r.Err(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "match: every packet of %d connections, byte for byte and to the nanosecond; replayed in %v\n",
		len(r.Conns), r.Elapsed.Round(time.Microsecond))
	return nil
}
