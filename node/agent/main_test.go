package agent

import (
	"fmt"
	"os"
	"testing"

	"github.com/svcnet/svcnet/node/sandbox"
)

// TestMain lets the test binary play the infra process of real sandboxes
// (TestVolumesInSandboxes), as the svcnet binary does in production.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "sandbox-init" {
		if err := sandbox.InitMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
