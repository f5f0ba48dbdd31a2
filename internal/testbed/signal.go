package testbed

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// CloseOnSignal makes the first SIGINT or SIGTERM close c (a
// netns.Attachment, a Bed), for a program that must not leave a namespace
// behind when interrupted. After closing it stops catching the signals and
// raises the same signal again, so the process ends as it would have
// (unless the program catches the signal itself). A failure to clean up is
// reported on standard error, since there is no one else to tell.
//
// stop ends the watch without closing c; it is idempotent.
func CloseOnSignal(c io.Closer) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
		})
	}
	go func() {
		select {
		case sig := <-sigs:
			if err := c.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "%v (on %v)\n", err, sig)
			}
			stop()
			if s, ok := sig.(unix.Signal); ok {
				_ = unix.Kill(os.Getpid(), s)
			}
		case <-done:
		}
	}()
	return stop
}
