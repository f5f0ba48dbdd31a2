package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"time"

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
	tol := fs.Duration("tolerance", replay.DefaultTolerance, "how far, beyond one tick, a segment's instant may be from the recorded one")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tcpwheel replay [flags] FILE.pcap\n\nReplays a pcap of one TCP connection between tcpwheel and a peer on a manual\nclock and compares what the stack sends with what was recorded.\n\nflags:")
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
