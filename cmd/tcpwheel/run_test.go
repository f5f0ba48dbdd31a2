package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"
	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/stack/replay"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
	"github.com/vishvananda/netns"
)

func TestRunFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"-loss", "0.05", "-seed", "7", "-tick", "100us", "-stats", "1s"}, true},
		{[]string{"-rt"}, true},
		{[]string{"-loss", "1.5"}, false},
		{[]string{"-loss", "-0.1"}, false},
		{[]string{"-loss", "NaN"}, false},
		{[]string{"-tick", "1us"}, false},
		{[]string{"-tick", "2s"}, false},
		{[]string{"-addr", "nonsense"}, false},
		{[]string{"-addr", "10.1.2.3"}, false},   // outside -peer
		{[]string{"-addr", "198.18.0.1"}, false}, // the kernel's own address
		{[]string{"-peer", "198.18.0.1"}, false}, // no prefix length
		{[]string{"-peer", "fd00::1/64"}, false}, // not IPv4
		{[]string{"-tun", "a-name-that-is-far-too-long"}, false},
		{[]string{"-tun", "bad/name"}, false},
		{[]string{"-netns", ""}, false},
		{[]string{"-netns", "a/b"}, false},
		{[]string{"-mtu", "20"}, false},
		{[]string{"-duration", "-1s"}, false},
		{[]string{"-txqueuelen", "80000"}, true},
		{[]string{"-txqueuelen", "0"}, false},
		{[]string{"-txqueuelen", "10000000"}, false},
		{[]string{"-loops", "2"}, true},
		{[]string{"-loops", "0"}, false},
		{[]string{"-loops", "2", "-pcap", "x.pcapng"}, false},
		{[]string{"-cpuprofile", "/nonexistent-dir/cpu.prof"}, false},
		{[]string{"-bogus"}, false},
		{[]string{"extra"}, false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseRunFlags(tc.args, io.Discard)
			if tc.ok && err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !tc.ok && !errors.Is(err, errUsage) {
				t.Fatalf("parse: %v, want a usage error (exit 2)", err)
			}
		})
	}
}

// TestStartCPUProfile: run's -cpuprofile writes a profile (gzipped, as
// pprof's) when it stops, and the file is complete then.
func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "second.prof")); err == nil {
		t.Error("a second profile started while one runs")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes (%v), want gzip", len(b), err)
	}
}

// digAnswer is dig's +answer output with its fields joined by single spaces,
// without the comment lines (";;") dig prints for a try that timed out (a
// query or answer lost to run's -loss) before the answer of a later try.
func digAnswer(o string) string {
	var keep []string
	for _, l := range strings.Split(o, "\n") {
		if !strings.HasPrefix(l, ";;") {
			keep = append(keep, l)
		}
	}
	return strings.Join(strings.Fields(strings.Join(keep, "\n")), " ")
}

// TestDigAnswer: a try that timed out before the answer (as TestServe saw
// through its 1% loss) leaves the answer as it is.
func TestDigAnswer(t *testing.T) {
	o := ";; communications error to 2001:db8::2#53: timed out\ntcpwheel.test.\t\t60\tIN\tA\t198.18.0.2\n"
	if got, want := digAnswer(o), "tcpwheel.test. 60 IN A 198.18.0.2"; got != want {
		t.Fatalf("digAnswer(%q) = %q, want %q", o, got, want)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestServe brings `tcpwheel run` up in a fresh namespace, talks to each service
// from the kernel side, and checks that everything is gone afterwards.
func TestServe(t *testing.T) {
	testbed.RequireRoot(t)
	capture := filepath.Join(t.TempDir(), "run.pcap")
	cfg, err := parseRunFlags([]string{"-netns", tun.UniqueName("twrun"), "-tun", tun.UniqueName("twr"), "-loss", "0.01", "-stats", "100ms", "-pcap", capture}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, &out) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ready") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no ready line in 10s; output: %q, serve: %v", out.String(), <-done)
		}
		time.Sleep(10 * time.Millisecond)
	}
	inNS := func(args ...string) (string, error) {
		cmd := exec.Command("ip", append([]string{"netns", "exec", cfg.netns}, args...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if o, err := inNS("curl", "-s", "-m", "10", "http://198.18.0.2/"); err != nil || !strings.Contains(o, "hashed timing wheel") {
		t.Fatalf("GET /: %q, %v", o, err)
	}
	if o, err := inNS("curl", "-s", "-m", "30", "-o", "/dev/null", "-w", "%{size_download}", "http://198.18.0.2/bytes/3000000"); err != nil || o != "3000000" {
		t.Fatalf("GET /bytes/3000000 downloaded %q, %v", o, err)
	}
	// run's TUN has offloads: the download went out in GSO frames (through
	// the loss, which takes them apart packet by packet).
	if o, err := inNS("curl", "-s", "-m", "10", "http://198.18.0.2/stats"); err != nil || !strings.Contains(o, "offloads: gso true gro true") || regexp.MustCompile(`frames out \d+, gso [1-9]`).FindString(o) == "" ||
		regexp.MustCompile(`lent to readers \d+, still held 0\n`).FindString(o) == "" {
		t.Fatalf("GET /stats: want offloads, GSO frames sent, no lent frame held:\n%s\n%v", o, err)
	}
	if o, err := inNS("curl", "-s", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}", "http://198.18.0.2/bytes/-5"); err != nil || o != "400" {
		t.Fatalf("GET /bytes/-5: status %q, %v; want 400", o, err)
	}
	if o, err := inNS("curl", "-s", "-m", "10", "-T", "/dev/null", "-H", "Expect:", "http://198.18.0.2/upload"); err != nil || o != "0\n" {
		t.Fatalf("PUT /upload: %q, %v", o, err)
	}
	if o, err := inNS("curl", "-s", "-m", "10", "http://198.18.0.2/small"); err != nil || o != "tcpwheel: hello\n" {
		t.Fatalf("GET /small: %q, %v", o, err)
	}
	if _, err := exec.LookPath("ping"); err == nil {
		if o, err := inNS("ping", "-c", "2", "-W", "2", "198.18.0.2"); err != nil {
			t.Fatalf("ping: %v\n%s", err, o)
		}
	}
	// Over IPv6: the same page, and ping -6.
	if o, err := inNS("curl", "-s", "-m", "10", "http://[2001:db8::2]/"); err != nil || !strings.Contains(o, "hashed timing wheel") {
		t.Fatalf("GET / over IPv6: %q, %v", o, err)
	}
	if _, err := exec.LookPath("ping"); err == nil {
		if o, err := inNS("ping", "-6", "-c", "2", "-W", "2", "2001:db8::2"); err != nil {
			t.Fatalf("ping -6: %v\n%s", err, o)
		}
	}
	// 256 KB echoed over IPv6: the kernel's bulk TCP/IPv6 into the stack
	// (segmented by the kernel into segments of MTU - 60, or handed over as
	// large frames by a link with offloads) and back. (The client sends all
	// before it reads: what is in flight must fit the buffers on the way.)
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10)
	if echoed, err := echoFromNamespace(cfg.netns, "[2001:db8::2]:7", big); err != nil || !bytes.Equal(echoed, big) {
		t.Fatalf("echo of 256 KB over IPv6: %d bytes back, %v", len(echoed), err)
	}
	// Echo, from a kernel socket made inside the namespace.
	echoed, err := echoFromNamespace(cfg.netns, "198.18.0.2:7", []byte("through the wheel"))
	if err != nil || string(echoed) != "through the wheel" {
		t.Fatalf("echo: %q, %v", echoed, err)
	}
	// UDP echo, from a connected kernel UDP socket inside the namespace; a
	// datagram to a closed port comes back as an ICMP port unreachable,
	// which the kernel socket reports as ECONNREFUSED. (Through 1% loss:
	// each is tried a few times.)
	if got, err := udpFromNamespace(cfg.netns, "198.18.0.2:7", "over UDP"); err != nil || got != "reply: over UDP" {
		t.Fatalf("UDP echo: %q, %v", got, err)
	}
	if got, err := udpFromNamespace(cfg.netns, "198.18.0.2:9", "anyone?"); err != nil || got != "refused" {
		t.Fatalf("UDP to a closed port: %q, %v; want ECONNREFUSED", got, err)
	}
	// DNS on UDP port 53: dig from the kernel side, over IPv4 and IPv6
	// (through the loss: dig tries up to 5 times).
	if haveDig(t) {
		for _, tc := range []struct{ server, name, qtype, want string }{
			{"198.18.0.2", "tcpwheel.test", "A", "tcpwheel.test. 60 IN A 198.18.0.2"},
			{"2001:db8::2", "tcpwheel.test", "AAAA", "tcpwheel.test. 60 IN AAAA 2001:db8::2"},
			{"198.18.0.2", "TCPwheel.Test", "AAAA", "TCPwheel.Test. 60 IN AAAA 2001:db8::2"},
			{"2001:db8::2", "tcpwheel.test", "A", "tcpwheel.test. 60 IN A 198.18.0.2"},
		} {
			o, err := inNS("dig", "+tries=5", "+time=1", "+noall", "+answer", "@"+tc.server, tc.name, tc.qtype)
			if got := digAnswer(o); err != nil || got != tc.want {
				t.Fatalf("dig @%s %s %s: answer section %q, %v; want %q", tc.server, tc.name, tc.qtype, o, err, tc.want)
			}
		}
		// Over TCP: dig +tcp, and ANY (which dig asks over TCP).
		if o, err := inNS("dig", "+tries=5", "+time=1", "+tcp", "+noall", "+answer", "@2001:db8::2", "tcpwheel.test", "A"); err != nil || digAnswer(o) != "tcpwheel.test. 60 IN A 198.18.0.2" {
			t.Fatalf("dig +tcp: answer section %q, %v", o, err)
		}
		if o, err := inNS("dig", "+tries=5", "+time=1", "+noall", "+answer", "@198.18.0.2", "tcpwheel.test", "ANY"); err != nil || !strings.Contains(o, "IN\tA\t198.18.0.2") || !strings.Contains(o, "IN\tAAAA\t2001:db8::2") || !strings.Contains(o, "IN\tSOA\t") {
			t.Fatalf("dig ANY: answer section %q, %v", o, err)
		}
		for _, tc := range []struct{ server, name, status string }{
			{"198.18.0.2", "nope.tcpwheel.test", "status: NXDOMAIN"},
			{"2001:db8::2", "example.com", "status: REFUSED"},
		} {
			if o, err := inNS("dig", "+tries=5", "+time=1", "@"+tc.server, tc.name); err != nil || !strings.Contains(o, tc.status) || !strings.Contains(o, "ANSWER: 0") {
				t.Fatalf("dig @%s %s: want %q and no answer:\n%s\n%v", tc.server, tc.name, tc.status, o, err)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	text := out.String()
	for _, want := range []string{"ready: stack 198.18.0.2 and 2001:db8::2 on", "kernel side 198.18.0.1/24 and 2001:db8::1/64", "ip netns exec " + cfg.netns + " curl", "dig @198.18.0.2 tcpwheel.test", "conns ", "tcpwheel stopping"} {
		if !strings.Contains(text, want) {
			t.Fatalf("output lacks %q:\n%s", want, text)
		}
	}
	if h, err := netns.GetFromName(cfg.netns); err == nil {
		h.Close()
		t.Fatalf("namespace %s still exists after serve returned", cfg.netns)
	}
	checkCaptureWithTcpdump(t, capture)
	// The flight recording replays exactly: every connection of the session
	// (curl, the echo), byte for byte and to the nanosecond.
	rec, err := replay.OpenRecording(capture)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Replay(rec, replay.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rep.Conns) < 4 {
		t.Fatalf("the recording holds %d connections; the session made at least 4", len(rep.Conns))
	}
}

// haveDig reports whether dig is installed; with CI=true its absence fails
// the test (scripts/deps.sh installs it), elsewhere it skips the DNS checks.
func haveDig(t *testing.T) bool {
	t.Helper()
	if _, err := exec.LookPath("dig"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("dig is missing (CI=true; scripts/deps.sh installs it)")
		}
		t.Log("dig is missing: no DNS checks")
		return false
	}
	return true
}

// checkCaptureWithTcpdump reads the capture (run -pcap's flight recording, a
// pcapng file) with pcapgo and with tcpdump: tcpdump must print every packet
// we wrote, and decode a handshake with our stack; both skip the recorder's
// custom blocks.
func checkCaptureWithTcpdump(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("pcapgo cannot read the capture: %v", err)
	}
	records := 0
	for {
		if _, _, err := r.ReadPacketData(); err != nil {
			if err != io.EOF {
				t.Fatalf("record %d: %v", records+1, err)
			}
			break
		}
		records++
	}
	if _, err := exec.LookPath("tcpdump"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tcpdump is missing (CI=true; scripts/deps.sh installs it)")
		}
		t.Skip("tcpdump is missing")
	}
	out, err := exec.Command("tcpdump", "-nr", path).Output()
	if err != nil {
		t.Fatalf("tcpdump -nr: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if records == 0 || len(lines) != records {
		t.Fatalf("tcpdump printed %d lines for %d records", len(lines), records)
	}
	for _, want := range []string{"> 198.18.0.2.80: Flags [S]", "198.18.0.2.80 > 198.18.0.1.", "Flags [S.]", "ICMP echo reply", "198.18.0.2.7 > 198.18.0.1.", ": UDP, length 8", "ICMP 198.18.0.2 udp port 9 unreachable"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("tcpdump output lacks %q; first lines:\n%s", want, strings.Join(lines[:min(5, len(lines))], "\n"))
		}
	}
}

// echoFromNamespace dials addr from a socket made in namespace ns, writes msg,
// half-closes and reads the answer.
func echoFromNamespace(ns, addr string, msg []byte) ([]byte, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "python3", "-c", `
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(sys.stdin.buffer.read()); s.shutdown(socket.SHUT_WR)
out = b""
while True:
    b = s.recv(65536)
    if not b: break
    out += b
sys.stdout.buffer.write(out)`, host, port)
	cmd.Stdin = bytes.NewReader(msg)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// udpFromNamespace sends msg from a connected UDP socket made in namespace ns
// to addr and reports "reply: " and the answer, or "refused" when the
// socket's receive fails with ECONNREFUSED (an ICMP port unreachable came
// back), trying up to 5 times, 2 s each.
func udpFromNamespace(ns, addr, msg string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("ip", "netns", "exec", ns, "python3", "-c", `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.connect((sys.argv[1], int(sys.argv[2])))
for _ in range(5):
    s.send(sys.argv[3].encode())
    try:
        print("reply: " + s.recv(65536).decode(), end="")
        break
    except ConnectionRefusedError:
        print("refused", end="")
        break
    except socket.timeout:
        continue
`, host, port, msg).Output()
	return string(out), err
}

// TestStatsLineDrops: the stats line names each drop reason that counted, and
// /stats lists every reason; retransmissions are broken down by kind.
// TestServeLoops: `tcpwheel run -loops 2` serves on a two-queue TUN, the
// kernel's connections spread over both loops, and /stats lists them.
func TestServeLoops(t *testing.T) {
	testbed.RequireRoot(t)
	cfg, err := parseRunFlags([]string{"-netns", tun.UniqueName("twrun"), "-tun", tun.UniqueName("twr"), "-loops", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line in 10s; output: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	inNS := func(args ...string) (string, error) {
		b, err := exec.Command("ip", append([]string{"netns", "exec", cfg.netns}, args...)...).CombinedOutput()
		return string(b), err
	}
	// 16 connections, each from a port of its own: the kernel's hash puts
	// them on both queues but with a chance of 2^-15.
	for i := range 16 {
		if o, err := inNS("curl", "-s", "-m", "10", "-o", "/dev/null", "-w", "%{size_download}", "http://198.18.0.2/bytes/100000"); err != nil || o != "100000" {
			t.Fatalf("GET %d: downloaded %q, %v", i, o, err)
		}
	}
	o, err := inNS("curl", "-s", "-m", "10", "http://198.18.0.2/stats")
	if err != nil || !strings.Contains(o, "loops (2, a queue each)") {
		t.Fatalf("GET /stats: want the loops:\n%s\n%v", o, err)
	}
	for _, m := range regexp.MustCompile(`loop (\d): packets in (\d+)`).FindAllStringSubmatch(o, -1) {
		if m[2] == "0" {
			t.Errorf("loop %s read no packet:\n%s", m[1], o)
		}
	}
}

func TestStatsLineDrops(t *testing.T) {
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	m, err := stack.NewManual(stack.Config{Device: dev, Addr: netip.MustParseAddr("198.18.0.2"), Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	line := statsLine(m.Stack)
	for _, want := range []string{"retrans 0 (rto 0, tlp 0, rack 0, fast 0, syn 0)", "drops 0 |", "| loop manual: wakeups 0, netpoll sleeps 0"} {
		if !strings.Contains(line, want) {
			t.Errorf("quiet stats line lacks %q:\n%s", want, line)
		}
	}
	for _, pkt := range [][]byte{make([]byte, 20), make([]byte, 20), {0x45}} {
		if err := m.Inject(pkt); err != nil {
			t.Fatal(err)
		}
	}
	line = statsLine(m.Stack)
	if want := "drops 3 (stack.BadIPHeader 1, stack.NotIPv4 2) |"; !strings.Contains(line, want) {
		t.Errorf("stats line lacks %q:\n%s", want, line)
	}
	report := statsReport(m.Stack)
	counts := map[string]string{}
	for _, l := range strings.Split(report, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			counts[f[0]] = f[1]
		}
	}
	for name, want := range map[string]string{"stack.NotIPv4": "2", "stack.MartianLand": "0", "tcp.OutOfWindow": "0", "listen.Backlog": "0"} {
		if got := counts[name]; got != want {
			t.Errorf("/stats shows %s %q, want %q:\n%s", name, got, want, report)
		}
	}
}

// TestRunStops: however `tcpwheel run` stops, its namespace goes: its
// stdout closed (`| head -c 1`: it used to die of SIGPIPE while printing,
// before its cleanup ran), SIGTERM, SIGINT, a panic inside run; and after SIGKILL, which no
// process can clean up after, the next run removes the leftover.
func TestRunStops(t *testing.T) {
	testbed.RequireRoot(t)
	// The test binary is tcpwheel too (TestMain): no build beside the
	// other packages' tests.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(asTcpwheel, "1")
	exists := func(ns string) bool { return nsExists(t, ns) }
	fresh := func() string {
		ns := tun.UniqueName("twrun")
		t.Cleanup(func() { exec.Command("ip", "netns", "delete", ns).Run() })
		return ns
	}
	// start runs tcpwheel in ns and waits for its ready line.
	start := func(ns string) *exec.Cmd {
		t.Helper()
		return startReady(t, bin, "run", "-netns", ns, "-tun", tun.UniqueName("twr"), "-duration", "30s")
	}

	t.Run("closed stdout", func(t *testing.T) {
		ns := fresh()
		out, err := exec.Command("sh", "-c", bin+" run -netns "+ns+" -tun "+tun.UniqueName("twr")+" -duration 3s -stats 100ms | head -c 1").CombinedOutput()
		if err != nil {
			t.Fatalf("tcpwheel run | head -c 1: %v\n%s", err, out)
		}
		// sh waits for tcpwheel too: it has cleaned up by now, or never will.
		if exists(ns) {
			t.Errorf("namespace %s left behind after its stdout closed", ns)
		}
	})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ns := fresh()
			cmd := start(ns)
			cmd.Process.Signal(sig)
			if err := cmd.Wait(); err != nil {
				t.Errorf("exit after %v: %v", sig, err)
			}
			if exists(ns) {
				t.Errorf("namespace %s left behind after %v", ns, sig)
			}
		})
	}
	t.Run("panic", func(t *testing.T) {
		ns := fresh()
		cmd := exec.Command(bin, "run", "-netns", ns, "-tun", tun.UniqueName("twr"), "-duration", "30s")
		cmd.Env = append(os.Environ(), panicOnReady+"=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "panic on the ready line") {
			t.Fatalf("want a panic: %v\n%s", err, out)
		}
		if exists(ns) {
			t.Errorf("namespace %s left behind after a panic", ns)
		}
	})
	t.Run("SIGKILL, then the next run", func(t *testing.T) {
		ns := fresh()
		cmd := start(ns)
		cmd.Process.Kill()
		cmd.Wait()
		if !exists(ns) {
			t.Fatalf("namespace %s gone after SIGKILL: nothing left to test", ns)
		}
		next := start(fresh())
		next.Process.Signal(syscall.SIGTERM)
		next.Wait()
		if exists(ns) {
			t.Errorf("the next run left the killed run's namespace %s", ns)
		}
	})
}

// startReady starts bin with args (a tcpwheel command that prints a ready
// line when it is up) and waits for that line; the rest of its output is
// discarded.
func startReady(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if !strings.Contains(line, "ready") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no ready line: %q, %v", line, err)
	}
	go io.Copy(io.Discard, stdout)
	return cmd
}
