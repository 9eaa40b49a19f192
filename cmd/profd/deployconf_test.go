package main

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
)

// TestDeployConfIsProfdFlags: every line of the example configuration the systemd unit
// reads (deploy/profd.conf) is a flag of profd's, `name = value`, and together they are a
// configuration that validates.
func TestDeployConfIsProfdFlags(t *testing.T) {
	f, err := os.Open("../../deploy/profd.conf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var args []string
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("deploy/profd.conf:%d: %q is not name = value", n, line)
		}
		args = append(args, "--"+strings.TrimSpace(name)+"="+strings.TrimSpace(value))
	}
	cfg, opts, err := parseFlags(args, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("deploy/profd.conf as flags %q: %v", args, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("deploy/profd.conf: %v", err)
	}
	if opts.metrics.addr == "" {
		t.Error("deploy/profd.conf serves no metrics")
	}
}
