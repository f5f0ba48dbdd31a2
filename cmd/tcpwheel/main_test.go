package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

// TestMain fails the run if `tcpwheel run`'s test left its namespace behind.
func TestMain(m *testing.M) { os.Exit(testbed.Main(m, "twrun")) }

func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		usageErr  bool
		wantOut   string
		wantError bool
	}{
		{args: nil, usageErr: true, wantError: true},
		{args: []string{"bogus"}, usageErr: true, wantError: true},
		{args: []string{"version"}, wantOut: "tcpwheel " + version},
		{args: []string{"help"}, wantOut: "usage: tcpwheel"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(tc.args, &out, &errOut)
			if (err != nil) != tc.wantError {
				t.Fatalf("run(%q) error = %v, want error %v", tc.args, err, tc.wantError)
			}
			if got := errors.Is(err, errUsage); got != tc.usageErr {
				t.Fatalf("run(%q) error %v: usage error %v, want %v", tc.args, err, got, tc.usageErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("run(%q) printed %q, want it to contain %q", tc.args, out.String(), tc.wantOut)
			}
		})
	}
}
