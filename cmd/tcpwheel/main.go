// Command tcpwheel runs the tcpwheel userspace TCP/IP stack and its tools.
//
//	tcpwheel run      bring the stack up on a TUN device in its own network namespace
//	tcpwheel compare  run the same scenarios on tcpwheel, gVisor and gVisor on the wheel
//	tcpwheel replay   replay a pcap against the stack on a manual clock and compare
//	tcpwheel version  print the version
//
// Bad flags or an unknown command exit with status 2.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const version = "0.1.0-dev"

// errUsage marks errors that exit with status 2.
var errUsage = errors.New("usage")

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "tcpwheel:", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "tcpwheel:", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: tcpwheel <command> [flags]

commands:
  run       bring the stack up on a TUN device in its own network namespace
  compare   run the same loss and timer scenarios on tcpwheel, gVisor and gVisor on the wheel
  replay    replay a pcap against the stack on a manual clock and compare
  version   print the version
`)
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "version":
		fmt.Fprintln(stdout, "tcpwheel", version)
		return nil
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "compare":
		return cmdCompare(args[1:], stdout, stderr)
	case "replay":
		return cmdReplay(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return nil
	default:
		usage(stderr)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
}
