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
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(c.args, "--out", t.TempDir()), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("profd %q: exit %d, %q; want %d saying %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}
