package stack_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// A net/http server on one stack and a net/http client on another: the
// server serves on the stack's net.Listener, and the client's Transport dials
// through the other stack's DialContext. Neither side knows it is not using
// the kernel's sockets.
//
// The device each stack sends its packets on is one end of an in-memory pipe
// (tuntest.Pipe), so the example needs no privileges. On a real machine the
// device is a TUN, and the peer the Linux kernel: tun.Open("tcpw0", 1500)
// creates one (root, /dev/net/tun), or netns.Attach (package tun/netns)
// creates it with its kernel side in a network namespace of its own, with an
// address such as 198.18.0.1/24, and hands it over as Attachment.Dev; then
// stack.New(stack.Config{Device: a.Dev, Addr: netip.MustParseAddr("198.18.0.2")}),
// as `tcpwheel run` does.
func Example_http() {
	// The link: two ends of an in-memory pipe, MTU 1500.
	serverDev, clientDev := tuntest.Pipe(1500)

	server, err := stack.New(stack.Config{Device: serverDev, Addr: netip.MustParseAddr("198.18.0.2")})
	if err != nil {
		panic(err)
	}
	defer server.Close() // closes its device too
	client, err := stack.New(stack.Config{Device: clientDev, Addr: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	// The server: net/http on the stack's listener.
	ln, err := server.Listen("tcp", ":80")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr) // the port is the client stack's ephemeral one
		fmt.Fprintf(w, "hello from %v, you are %v\n", r.Host, host)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()

	// The client: net/http dialling through the other stack.
	hc := &http.Client{
		Transport: &http.Transport{DialContext: client.DialContext},
		Timeout:   10 * time.Second,
	}
	resp, err := hc.Get("http://198.18.0.2/hello")
	if err != nil {
		panic(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Status)
	fmt.Print(string(body))

	// Output:
	// 200 OK
	// hello from 198.18.0.2, you are 198.18.0.1
}
