package compare

import (
	"os"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

// TestMain fails the run if a comparison left a namespace behind.
func TestMain(m *testing.M) { os.Exit(testbed.Main(m, "twc")) }
