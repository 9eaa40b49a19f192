package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/daemon"
)

// writeConfig writes text to a config file of the test's.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profd.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const testConfig = `# a profd config
pid = 11,12
pid = 13          # a list flag's key repeats
jit-image = lli-14
format = pprof
format = capture
freq = 99
freq = 199        # a later value wins, as a later flag does
stacks = false
out = /var/lib/profd run
jitdump-dir = "/srv/jit #2"
flush-interval = 30s
log-level = debug
`

// TestConfigFile: every key sets its flag as the flag would, repeated list keys add up.
func TestConfigFile(t *testing.T) {
	cfg, lo, err := parseFlags([]string{"--config", writeConfig(t, testConfig)}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Pids, []uint32{11, 12, 13}) || !reflect.DeepEqual(cfg.JITImages, []string{"lli-14"}) ||
		!reflect.DeepEqual(cfg.Formats, []daemon.Format{daemon.FormatPprof, daemon.FormatCapture}) || cfg.FreqHz != 199 ||
		cfg.Stacks || cfg.OutDir != "/var/lib/profd run" || cfg.JitdumpDir != "/srv/jit #2" ||
		cfg.FlushInterval != 30*time.Second || lo.level != slog.LevelDebug || cfg.Event != "cycles" {
		t.Errorf("config read as %+v, log %+v", cfg, lo)
	}
}

// TestConfigUnsafe: a config file that users other than profd's (and root) may change is
// said to be so; one only profd's user may write is not.
func TestConfigUnsafe(t *testing.T) {
	path := writeConfig(t, testConfig)
	for _, tc := range []struct {
		mode   os.FileMode
		owner  int
		unsafe bool
	}{
		{0o644, os.Geteuid(), false},
		{0o600, os.Geteuid(), false},
		{0o664, os.Geteuid(), true},
		{0o666, os.Geteuid(), true},
		{0o644, 65534, true}, // another user's
	} {
		if tc.owner != os.Geteuid() && os.Geteuid() != 0 {
			continue // only root gives a file away
		}
		if err := os.Chown(path, tc.owner, -1); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, lo, err := parseFlags([]string{"--config", path}, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := lo.configUnsafe != nil; got != tc.unsafe {
			t.Errorf("mode %#o, owner %d: unsafe %v (%v), want %v", tc.mode, tc.owner, got, lo.configUnsafe, tc.unsafe)
		}
	}
}

// TestConfigPrecedence: a flag on the command line wins over the file's key, and a list
// flag given there replaces the file's list; the file's other keys still count.
func TestConfigPrecedence(t *testing.T) {
	path := writeConfig(t, testConfig)
	for _, args := range [][]string{
		{"--config", path, "--pid", "7", "--freq", "500", "--stacks=true", "--format", "llvm-text"},
		{"--pid", "7", "--freq", "500", "--stacks", "--format", "llvm-text", "--config", path}, // order does not matter
	} {
		cfg, _, err := parseFlags(args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cfg.Pids, []uint32{7}) || cfg.FreqHz != 500 || !cfg.Stacks ||
			!reflect.DeepEqual(cfg.Formats, []daemon.Format{daemon.FormatLLVMText}) ||
			cfg.OutDir != "/var/lib/profd run" || !reflect.DeepEqual(cfg.JITImages, []string{"lli-14"}) {
			t.Errorf("%q: %+v", args, cfg)
		}
	}
}

// TestConfigErrors: a bad config file exits 2 naming the file, the line and what is wrong
// (for an unknown key, the closest flag).
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"freq = 99\nfreqency = 99\n", `:2: unknown key "freqency" (the closest flag is "freq")`},
		{"# x\n\njitimage = lli-14\n", `:3: unknown key "jitimage" (the closest flag is "jit-image")`},
		{"--pid = 3\n", `:1: unknown key "--pid" (the closest flag is "pid")`},
		{"stacks = yes\n", `:1: stacks = "yes": want true or false`},
		{"pid = 12\npid = x\n", `:2: pid = "x": not a pid`},
		{"freq 99\n", `:1: "freq 99": want key = value`},
		{"out = \"/x\" y\n", `:1: out: bad quoted value`},
		{"config = other.conf\n", `:1: config: a config file cannot name another`},
	} {
		path := writeConfig(t, c.text)
		var stderr bytes.Buffer
		if code := run([]string{"--config", path}, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), path+c.want) {
			t.Errorf("%q: exit %d, %q; want exit %d and %q", c.text, code, stderr.String(), exitUsage, c.want)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--config", filepath.Join(t.TempDir(), "missing.conf")}, io.Discard, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "missing.conf: no such file") {
		t.Errorf("missing file: exit %d, %q", code, stderr.String())
	}
}

func TestParseConfig(t *testing.T) {
	got, err := parseConfig([]byte("\uFEFF# comment\r\n  key = a value with spaces  \r\n\nk2=v#not a comment\nk3 = \"q # \\\"x\\\"\" # c\nk4 =\n"))
	want := []configEntry{{2, "key", "a value with spaces"}, {4, "k2", "v#not a comment"}, {5, "k3", `q # "x"`}, {6, "k4", ""}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseConfig = %+v, %v; want %+v", got, err, want)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(testConfig))
	f.Add([]byte("a = \"b\\n\" # c\r\n=x\n"))
	f.Add([]byte("k = \"unterminated\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseConfig(data)
		if err != nil {
			if !strings.Contains(err.Error(), ": ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		// Written back with every value quoted, the entries read back the same.
		var text strings.Builder
		for i, e := range entries {
			if e.key == "" || strings.ContainsAny(e.key, " \t#=\n") || i > 0 && e.line <= entries[i-1].line {
				t.Fatalf("entry %+v", e)
			}
			text.WriteString(e.key + " = " + strconv.Quote(e.value) + "\n")
		}
		again, err := parseConfig([]byte(text.String()))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("written back: %v, %d entries of %d\n%s", err, len(again), len(entries), text.String())
		}
		for i := range again {
			if again[i].key != entries[i].key || again[i].value != entries[i].value {
				t.Fatalf("entry %d read back as %+v, was %+v", i, again[i], entries[i])
			}
		}
	})
}
