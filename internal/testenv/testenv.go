// Package testenv holds the one skip helper for tests that need privileges, kernel features or
// external tools. A test names everything it needs in one call:
//
//	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.PerfEvent("cpu-clock"))
//
// and every unmet need is reported in a single t.Skipf. Use it only for needs that really vary
// between machines (root, a hardware PMU, an optional tool). A feature every supported kernel
// has is asserted by the test, not skipped.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Need returns "" when it is met, else what is missing.
type Need func() string

// Requires skips t, naming every unmet need at once.
func Requires(t testing.TB, needs ...Need) {
	t.Helper()
	var unmet []string
	for _, n := range needs {
		if why := n(); why != "" {
			unmet = append(unmet, why)
		}
	}
	if len(unmet) > 0 {
		t.Skipf("requires %s", strings.Join(unmet, ", "))
	}
}

// Root needs an effective uid of 0.
func Root() string {
	if os.Geteuid() != 0 {
		return "root"
	}
	return ""
}

// Tool needs an executable on PATH.
func Tool(name string) Need {
	return func() string {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Sprintf("%s on PATH", name)
		}
		return ""
	}
}
