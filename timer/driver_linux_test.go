//go:build linux

package timer

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDriverRunsOnOneThread(t *testing.T) {
	d, w, _ := newTestDriver(t, DefaultTick)
	tids := make(chan int, 3)
	var e Entry
	e.Init(func() { tids <- unix.Gettid() })
	postWait(t, d, func() {
		tids <- unix.Gettid()
		w.Start(&e, time.Millisecond)
	})
	if err := d.Post(func() { tids <- unix.Gettid() }); err != nil {
		t.Fatal(err)
	}
	want := recvWithin(t, tids)
	if want == unix.Gettid() {
		t.Fatal("posted function ran on the test's thread")
	}
	for range 2 {
		if got := recvWithin(t, tids); got != want {
			t.Errorf("ran on thread %d, want the driver's thread %d", got, want)
		}
	}
	var slack int
	postWait(t, d, func() {
		var err error
		slack, err = unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		if err != nil {
			t.Error(err)
		}
	})
	if slack != 1 {
		t.Errorf("driver thread's timer slack is %d ns, want 1", slack)
	}
}

func TestDriverAddReadFD(t *testing.T) {
	d, w, _ := newTestDriver(t, DefaultTick)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])

	got := make(chan string, 10)
	var e Entry
	e.Init(func() { got <- "timer" })
	onReadable := func() {
		buf := make([]byte, 64)
		for {
			n, err := unix.Read(p[0], buf)
			if n <= 0 || err != nil {
				return
			}
			got <- string(buf[:n])
			// Timers work from fd callbacks, as they will from the TCP stack's.
			if err := w.Start(&e, time.Millisecond); err != nil {
				t.Error(err)
			}
		}
	}
	if err := d.AddReadFD(p[0], onReadable); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(p[1], []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if s := recvWithin(t, got); s != "hello" {
		t.Errorf("read %q, want hello", s)
	}
	if s := recvWithin(t, got); s != "timer" {
		t.Errorf("got %q, want the timer started by the fd callback", s)
	}

	if err := d.RemoveReadFD(p[0]); err != nil {
		t.Fatal(err)
	}
	before := d.Wakeups()
	if _, err := unix.Write(p[1], []byte("ignored")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := d.Wakeups() - before; n != 0 {
		t.Errorf("%d wakeups for a removed fd, want 0", n)
	}
	select {
	case s := <-got:
		t.Errorf("removed fd's callback ran and read %q", s)
	default:
	}
	if err := d.RemoveReadFD(p[0]); err == nil {
		t.Error("removing an fd twice: want an error")
	}
	if err := d.AddReadFD(p[0], nil); !errors.Is(err, ErrNoFunc) {
		t.Errorf("AddReadFD(nil): got %v, want ErrNoFunc", err)
	}
	d.Close()
	if err := d.AddReadFD(p[0], onReadable); !errors.Is(err, ErrClosed) {
		t.Errorf("AddReadFD after Close: got %v, want ErrClosed", err)
	}
}
