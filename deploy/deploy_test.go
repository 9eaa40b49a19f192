// Package deploy holds profd's service files: deploy/profd.service, the systemd unit, and
// deploy/profd.conf, the example configuration it reads. Its tests check them.
package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnitVerifies runs systemd-analyze verify on the unit, its ExecStart pointed at an
// executable that exists (verify checks that it does; this test's own binary stands in for
// profd, which verify does not run), and fails on anything it says about the unit.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd): the unit is not verified")
	}
	unit, err := os.ReadFile("profd.service")
	if err != nil {
		t.Fatal(err)
	}
	const binary = "/usr/local/bin/profd"
	if !strings.Contains(string(unit), "ExecStart="+binary+" ") {
		t.Fatalf("profd.service: no ExecStart=%s", binary)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "profd.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), binary, self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	var about []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "profd") {
			about = append(about, line)
		}
	}
	if err != nil || len(about) > 0 {
		t.Errorf("systemd-analyze verify profd.service: %v\n%s", err, strings.Join(about, "\n"))
	}
}

// TestCapabilitiesKnown: verify ignores capability names systemd does not know (the unit
// would start with fewer capabilities than it lists); each must be one systemd-analyze
// capability lists, and profd's ambient capabilities are its bounding set.
func TestCapabilitiesKnown(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd): the unit's capabilities are not checked")
	}
	out, err := exec.Command(analyze, "capability").Output()
	if err != nil {
		t.Fatalf("systemd-analyze capability: %v", err)
	}
	known := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			known[strings.ToUpper(f[0])] = true
		}
	}
	bounding := strings.Fields(setting(t, "profd.service", "CapabilityBoundingSet", "="))
	ambient := strings.Fields(setting(t, "profd.service", "AmbientCapabilities", "="))
	if strings.Join(bounding, " ") != strings.Join(ambient, " ") {
		t.Errorf("AmbientCapabilities %v, CapabilityBoundingSet %v: want the same", ambient, bounding)
	}
	for _, c := range bounding {
		if !known[c] {
			t.Errorf("CapabilityBoundingSet: systemd knows no %s", c)
		}
	}
	if len(bounding) == 0 || len(known) < 30 {
		t.Errorf("%d capabilities in the unit, %d known to systemd-analyze", len(bounding), len(known))
	}
}

// TestStopTimeouts: systemd waits for profd's final profiles before it kills it.
func TestStopTimeouts(t *testing.T) {
	unitStop := durationSetting(t, "profd.service", "TimeoutStopSec", "=")
	profdStop := durationSetting(t, "profd.conf", "stop-timeout", " = ")
	if unitStop < profdStop+5*time.Second {
		t.Errorf("TimeoutStopSec %v leaves profd's stop timeout %v less than 5 s to close", unitStop, profdStop)
	}
}

// durationSetting reads the duration of the line `key<sep>value` in file.
func durationSetting(t *testing.T, file, key, sep string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(setting(t, file, key, sep))
	if err != nil {
		t.Fatalf("%s: %s: %v", file, key, err)
	}
	return d
}

// setting reads the value of the line `key<sep>value` in file.
func setting(t *testing.T, file, key, sep string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key+sep); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s: no %s", file, key)
	return ""
}
