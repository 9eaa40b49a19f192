package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/daemon"
)

func TestParseKeep(t *testing.T) {
	for _, c := range []struct {
		in   string
		want daemon.Retention
	}{
		{"48", daemon.Retention{Count: 48}},
		{"24h", daemon.Retention{Age: 24 * time.Hour}},
		{"7d", daemon.Retention{Age: 7 * 24 * time.Hour}},
		{"512MB", daemon.Retention{Bytes: 512e6}},
		{"2GiB", daemon.Retention{Bytes: 2 << 30}},
		{"10, 90m ,1TiB", daemon.Retention{Count: 10, Age: 90 * time.Minute, Bytes: 1 << 40}},
	} {
		got, err := parseKeep(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseKeep(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "0", "-3", "1h,2h", "5,6", "12XB", "0GiB", "0s", "soon", "99999999999999TiB"} {
		if _, err := parseKeep(in); err == nil || !strings.Contains(err.Error(), keepForms) {
			t.Errorf("parseKeep(%q): error %v, want one naming the accepted forms", in, err)
		}
	}
	if got := describeKeep(daemon.DefaultKeep); got != "24h,1GiB" {
		t.Errorf("the default described as %q, want 24h,1GiB as --help says", got)
	}
}

// TestKeepUsageErrors: a bad --keep, or --keep without --flush-interval, is a usage error
// whose message says what is wanted.
func TestKeepUsageErrors(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pid", self, "--keep", "24h"}, "--keep needs --flush-interval"},
		{[]string{"--pid", self, "--flush-interval", "1s", "--keep", "lots"}, keepForms},
		{[]string{"--pid", self, "--keep-ended", "10m"}, "--keep-ended needs --flush-interval"},
		{[]string{"--pid", self, "--flush-interval", "1s", "--keep-ended", "soon"}, "want a duration such as 10m or 1d, or all"},
		{[]string{"--pid", self, "--flush-interval", "1s", "--keep-ended", "0s"}, "want a duration such as 10m or 1d, or all"},
		{[]string{"--pid", self, "--flush-interval", "1s", "--keep-ended", "1m", "--format", "llvm-text"}, "--keep-ended needs pprof or capture in --format"},
		{[]string{"--pid", self, "--flush-interval", "1s", "--keep-ended", "1m", "--reset-on-flush"}, "--keep-ended and --reset-on-flush exclude each other"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(c.args, "--out", t.TempDir()), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("profd %q: exit %d, %q; want %d saying %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}

// TestKeepEndedDefault: --flush-interval keeps a function that ended in the cumulative
// outputs for ten intervals, at least a minute, unless no interval file would keep it.
func TestKeepEndedDefault(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		formats  []daemon.Format
		reset    bool
		given    time.Duration
		want     time.Duration
	}{
		{0, nil, false, 0, daemon.KeepAllEnded},
		{time.Second, nil, false, 0, time.Minute},
		{30 * time.Second, nil, false, 0, 5 * time.Minute},
		{30 * time.Second, nil, false, 2 * time.Hour, 2 * time.Hour},
		{30 * time.Second, nil, false, daemon.KeepAllEnded, daemon.KeepAllEnded},
		{30 * time.Second, []daemon.Format{daemon.FormatLLVMText}, false, 0, daemon.KeepAllEnded},
		{30 * time.Second, []daemon.Format{daemon.FormatCapture}, false, 0, 5 * time.Minute},
		{30 * time.Second, nil, true, 0, daemon.KeepAllEnded}, // no output is cumulative
	} {
		cfg := daemon.Config{Pids: []uint32{uint32(os.Getpid())}, OutDir: t.TempDir(), FlushInterval: c.interval,
			Formats: c.formats, ResetOnFlush: c.reset, KeepEnded: c.given}
		if err := cfg.Validate(); err != nil || cfg.KeepEnded != c.want {
			t.Errorf("--flush-interval %v --format %v --reset-on-flush=%v --keep-ended %v: %v (%v), want %v", c.interval, c.formats, c.reset, c.given, cfg.KeepEnded, err, c.want)
		}
	}
}
