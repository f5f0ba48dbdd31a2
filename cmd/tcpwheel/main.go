// Command tcpwheel runs the tcpwheel userspace TCP/IP stack and its tools.
//
//	tcpwheel run      bring the stack up on a TUN device in its own network namespace
//	tcpwheel forward  relay every TCP and UDP flow from a client namespace to kernel sockets in a server namespace
//	tcpwheel compare  run the same scenarios on tcpwheel, gVisor and gVisor on the wheel
//	tcpwheel replay   replay a pcap against the stack on a manual clock and compare
//	tcpwheel version  print the version
//
// -h (on its own or after any command) prints the usage and exits 0; bad flags or
// an unknown command exit with status 2.
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
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// exitCode reports err on stderr and returns the process's exit status: 0 for
// success and for -h (the usage was asked for and printed), 2 for a usage
// error, 1 for anything else.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "tcpwheel:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "tcpwheel:", err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: tcpwheel <command> [flags]

commands:
  run       bring the stack up on a TUN device in its own network namespace
  forward   relay every TCP and UDP flow a client namespace sends, to any address, to kernel sockets in a server namespace
  compare   run the same loss and timer scenarios on tcpwheel, gVisor and gVisor on the wheel
  replay    replay a pcap against the stack on a manual clock and compare
  version   print the version

"tcpwheel <command> -h" describes a command and its flags.
`)
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "version":
		return cmdVersion(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "forward":
		return cmdForward(args[1:], stdout, stderr)
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

// cmdVersion prints the version; it takes no flags but -h.
func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tcpwheel version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: tcpwheel version\n\nPrints the version of tcpwheel.") }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: version: unexpected argument %q", errUsage, fs.Arg(0))
	}
	fmt.Fprintln(stdout, "tcpwheel", version)
	return nil
}
