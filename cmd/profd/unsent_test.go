package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/daemon"
	"github.com/profd/profd/otlpexport"
	"github.com/profd/profd/profileio"
)

// TestUnsentList: the list written is read back as it was, those of files outside the
// directory left out; an empty list removes the file; a list another user could have
// written, or not of profd's making, is refused; lines profd does not write are skipped.
func TestUnsentList(t *testing.T) {
	dir := t.TempDir()
	digest := strings.Repeat("ab", 32)
	sources := []string{
		joinSource(filepath.Join(dir, "a-1.20261129T000000.000Z.profd"), 12, digest),
		joinSource("/elsewhere/b.profd", 13, digest),
		joinSource(filepath.Join(dir, "c-2.20261129T000001.000Z.profd"), 14, digest),
	}
	if err := writeUnsent(dir, sources); err != nil {
		t.Fatal(err)
	}
	got, err := readUnsent(dir)
	if want := []string{sources[0], sources[2]}; err != nil || !slices.Equal(got, want) {
		t.Errorf("read back %q, %v; want %q", got, err, want)
	}
	path := filepath.Join(dir, unsentName)
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the list: %v, want mode 0600", err)
	}

	os.Chmod(path, 0o622)
	if got, err := readUnsent(dir); err == nil || got != nil {
		t.Errorf("a list others may write: read %q, %v; want it refused", got, err)
	}
	os.WriteFile(path, []byte("something else\n"), 0o600)
	os.Chmod(path, 0o600)
	if got, err := readUnsent(dir); err == nil || got != nil {
		t.Errorf("a list without the header: read %q, %v; want it refused", got, err)
	}
	lines := []string{unsentHeader,
		"../x.profd\t12\t" + digest, "/etc/shadow\t12\t" + digest, "ok.profd\t-1\t" + digest, "ok.profd\t12\tnot-a-digest",
		"ok.profd\t12\t" + digest}
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	if got, err := readUnsent(dir); err != nil || !slices.Equal(got, []string{joinSource(filepath.Join(dir, "ok.profd"), 12, digest)}) {
		t.Errorf("read %q, %v; want the last line's alone", got, err)
	}

	if err := writeUnsent(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("an empty list left the file: %v", err)
	}
	if got, err := readUnsent(dir); err != nil || got != nil {
		t.Errorf("no list: read %q, %v; want nothing", got, err)
	}
}

// FuzzParseUnsent: a line of the list never names a file outside its directory, nor one
// whose size or digest is not as profd writes them.
func FuzzParseUnsent(f *testing.F) {
	f.Add("a.profd\t12\t" + strings.Repeat("0f", 32))
	f.Add("../a.profd\t12\t" + strings.Repeat("0f", 32))
	f.Add("\t\t")
	f.Fuzz(func(t *testing.T, line string) {
		s, ok := parseUnsent("/d", line)
		if !ok {
			return
		}
		path, size, where := splitSource(s)
		if filepath.Dir(path) != "/d" || size <= 0 || !isDigest(where) {
			t.Errorf("%q read as %q", line, s)
		}
	})
}

// TestStopListsEveryUnsentInterval: at a stop whose deadline has passed, every interval not
// sent is listed for the next run, oldest first: the one waiting for its retry, those
// queued, those not yet converted.
func TestStopListsEveryUnsentInterval(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var cfg daemon.Config
	x, err := startExport(otlpOptions{cfg: otlpexport.Config{Endpoint: srv.URL, Protocol: otlpexport.ProtocolHTTP}}, &cfg,
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	x.Start(dir)
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var want []string
	export := func(i int) {
		c := &profileio.Capture{
			Meta:      profileio.CaptureMeta{Event: "cpu-clock", Host: "h", StartTime: start.Add(time.Duration(i) * time.Second)},
			Processes: []profileio.Process{{Pid: 100, Command: "loop", Executable: "/usr/bin/loop"}},
			Unmapped:  []profileio.UnmappedCount{{Pid: 100, Mapping: "/usr/bin/loop", Count: 100}},
		}
		path := filepath.Join(dir, fmt.Sprintf("loop-100.%d.profd", i))
		iv := daemon.Interval{Base: "loop-100", Start: c.Meta.StartTime, End: c.Meta.StartTime.Add(time.Second), Capture: c,
			CaptureFile: path, CaptureBytes: writeCaptureFile(t, path, c)}
		want = append(want, laterSource(iv))
		x.Export(iv)
	}
	export(0)
	for x.exp.Stats().Retries == 0 { // then it waits the hour the server asks for
		time.Sleep(10 * time.Millisecond)
	}
	for i := 1; i < 8; i++ {
		export(i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.Close(ctx); err == nil || !strings.Contains(err.Error(), "8 intervals not sent") {
		t.Errorf("Close: %v, want 8 intervals not sent", err)
	}
	if got, err := readUnsent(dir); err != nil || !slices.Equal(got, want) {
		t.Errorf("listed %d intervals (%v), want the 8 exported, in order:\n got %q\nwant %q", len(got), err, got, want)
	}
}

// TestUnsentListWhileRunning: while profd runs, the list follows the intervals kept for
// later and those handed to the export and not sent yet, at most every unsentEvery, so that
// a killed profd leaves one a second old; the stop's leaves out those not sent yet that
// were not dropped (the endpoint may have taken them).
func TestUnsentListWhileRunning(t *testing.T) {
	x := &intervalExporter{log: slog.New(slog.DiscardHandler)} // no goroutine sends or saves beside
	dir := t.TempDir()
	x.Start(dir)
	digest := strings.Repeat("cd", 32)
	a := joinSource(filepath.Join(dir, "a.profd"), 1, digest)
	b := joinSource(filepath.Join(dir, "b.profd"), 2, digest)
	x.keepForLater(a)
	x.saveUnsent(false)
	x.keepForLater(b)
	x.saveUnsent(false) // within unsentEvery of the last
	if got, err := readUnsent(dir); err != nil || !slices.Equal(got, []string{a}) {
		t.Errorf("listed %q, %v; want the first alone, written at once", got, err)
	}
	x.laterMu.Lock()
	x.savedAt = x.savedAt.Add(-unsentEvery)
	x.laterMu.Unlock()
	x.saveUnsent(false)
	if got, err := readUnsent(dir); err != nil || !slices.Equal(got, []string{a, b}) {
		t.Errorf("listed %q, %v; want both, unsentEvery after the last", got, err)
	}

	c := joinSource(filepath.Join(dir, "c.profd"), 3, digest)
	d := joinSource(filepath.Join(dir, "d.profd"), 4, digest)
	e := joinSource(filepath.Join(dir, "e.profd"), 5, digest)
	save := func() {
		x.laterMu.Lock()
		x.savedAt = x.savedAt.Add(-unsentEvery)
		x.laterMu.Unlock()
		x.saveUnsent(false)
	}
	x.handed(c)
	x.handed(d)
	x.handed(e)
	save()
	if got, err := readUnsent(dir); err != nil || !slices.Equal(got, []string{a, b, c, d, e}) {
		t.Errorf("listed %q, %v; want those kept for later, then those handed, in order", got, err)
	}
	x.settled(d)      // sent
	x.keepForLater(c) // dropped: kept for later, after the others
	save()
	if got, err := readUnsent(dir); err != nil || !slices.Equal(got, []string{a, b, c, e}) {
		t.Errorf("listed %q, %v; want d, delivered, left out", got, err)
	}
	x.saveUnsent(true)
	if got, err := readUnsent(dir); err != nil || !slices.Equal(got, []string{a, b, c}) {
		t.Errorf("the stop listed %q, %v; want e, handed and not dropped, left out", got, err)
	}
}
