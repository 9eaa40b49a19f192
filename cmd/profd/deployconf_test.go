package main

import (
	"io"
	"testing"
)

// TestDeployConf: the example configuration the systemd unit reads (deploy/profd.conf)
// parses with --config and validates, and serves the metrics.
func TestDeployConf(t *testing.T) {
	cfg, opts, err := parseFlags([]string{"--config", "../../deploy/profd.conf"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("--config deploy/profd.conf: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("deploy/profd.conf: %v", err)
	}
	if len(cfg.JITImages) == 0 || cfg.OutDir != "/var/lib/profd" || opts.metrics.addr == "" {
		t.Errorf("deploy/profd.conf: images %v, out %s, metrics at %q; want images, /var/lib/profd and an address",
			cfg.JITImages, cfg.OutDir, opts.metrics.addr)
	}
}
