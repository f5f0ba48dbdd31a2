// Command fwbench is scripts/forward-bench.sh's helper: the servers of the
// server namespace and the pings of the client namespace, each a process
// of its own (the forwarder in between is another).
//
//	fwbench serve ADDR     TCP echo on ADDR:9000, UDP echo on ADDR:9001, and
//	                       HTTP on ADDR:80: GET /bytes/N, GET /small, PUT /upload
//	fwbench ping tcp|udp ADDR:PORT N
//	                       N pings of 100 bytes, one at a time; prints
//	                       "n N p50 US p90 US p99 US" (round trips in µs)
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fwbench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 2 && args[0] == "serve":
		return serve(args[1])
	case len(args) == 4 && args[0] == "ping":
		n, err := strconv.Atoi(args[3])
		if err != nil || n < 1 || n > 1000000 {
			return fmt.Errorf("ping count %q: want 1 to 1000000", args[3])
		}
		return ping(args[1], args[2], n)
	}
	return errors.New("usage: fwbench serve ADDR | fwbench ping tcp|udp ADDR:PORT N")
}

// serve runs the three servers on addr until one fails.
func serve(addr string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "9000"))
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", net.JoinHostPort(addr, "9001"))
	if err != nil {
		return err
	}
	errs := make(chan error, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				errs <- err
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			http.Error(w, "N must be an integer in [0, 2^40]", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("GET /small", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "fwbench: hello\n")
	})
	mux.HandleFunc("PUT /upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.CopyBuffer(io.Discard, r.Body, make([]byte, 256<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, strconv.FormatInt(n, 10)+"\n")
	})
	go func() { errs <- http.ListenAndServe(net.JoinHostPort(addr, "80"), mux) }()
	return <-errs
}

// ping sends n messages of 100 bytes to addr over network, each after
// the echo of the one before, and prints the round trips' quantiles.
func ping(network, addr string, n int) error {
	if network != "tcp" && network != "udp" {
		return fmt.Errorf("network %q: want tcp or udp", network)
	}
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	msg, buf := make([]byte, 100), make([]byte, 2048)
	rtts := make([]float64, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		c.SetReadDeadline(t0.Add(2 * time.Second))
		if network == "tcp" {
			_, err = io.ReadFull(c, buf[:len(msg)])
		} else {
			_, err = c.Read(buf)
		}
		if err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		rtts = append(rtts, float64(time.Since(t0))/float64(time.Microsecond))
	}
	slices.Sort(rtts)
	q := func(p float64) float64 { return rtts[int(p*float64(len(rtts)-1))] }
	fmt.Printf("n %d p50 %.0f p90 %.0f p99 %.0f\n", n, q(0.5), q(0.9), q(0.99))
	return nil
}
