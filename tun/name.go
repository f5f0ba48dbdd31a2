package tun

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// maxNameLen is the longest interface name Linux accepts: IFNAMSIZ (16)
// minus the terminating NUL.
const maxNameLen = 15

// UniqueName returns prefix followed by the process id and six random
// characters, all in lower-case base 36, e.g. "tw1a2bx9q0kz". The result
// is at most 15 bytes long, so it is valid both as an interface name
// (IFNAMSIZ) and as a network namespace name; prefix is shortened as
// needed to fit. prefix should consist of letters, digits, '-' or '_'.
func UniqueName(prefix string) string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	const randLen = 6
	pid := strconv.FormatInt(int64(os.Getpid()), 36)
	if room := maxNameLen - len(pid) - randLen; len(prefix) > room {
		prefix = prefix[:max(room, 0)]
	}
	b := make([]byte, 0, maxNameLen)
	b = append(b, prefix...)
	b = append(b, pid...)
	for range randLen {
		b = append(b, alphabet[rand.IntN(len(alphabet))])
	}
	if len(b) > maxNameLen { // a pid longer than 9 base-36 digits: impossible on Linux
		b = b[len(b)-maxNameLen:]
	}
	return string(b)
}

// CheckLinkName applies the kernel's dev_valid_name rules to an interface
// name; an error wraps ErrInvalidConfig.
func CheckLinkName(name string) error {
	switch {
	case name == "", len(name) > maxNameLen:
		return fmt.Errorf("link name %q: must be 1 to %d bytes: %w", name, maxNameLen, ErrInvalidConfig)
	case name == "." || name == "..",
		strings.ContainsAny(name, "/: \t\n\r\v\f\x00"):
		return fmt.Errorf("link name %q: %w", name, ErrInvalidConfig)
	}
	return nil
}
