package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profileio"
)

// TestIntervalNameTaken: an interval whose start repeats an earlier one's to the
// millisecond (the wall clock stepped back since) is named by the next millisecond free,
// and the earlier one's files are left as they were, those of an earlier run in another
// format included; --keep's reading of the directory finds each interval apart.
func TestIntervalNameTaken(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC).Add(123456 * time.Microsecond)
	interval := func(pid uint32) Interval {
		c := &profileio.Capture{
			Meta:      profileio.CaptureMeta{Event: "cpu-clock", Host: "h", StartTime: start},
			Processes: []profileio.Process{{Pid: pid, Command: "loop"}},
			Unmapped:  []profileio.UnmappedCount{{Pid: pid, Mapping: "/usr/bin/loop", Count: uint64(pid)}},
		}
		return Interval{Base: "loop-1", Start: start, End: start.Add(time.Second), Capture: c}
	}
	// An earlier run's interval at that start, in pprof alone.
	if err := os.WriteFile(intervalPath(dir, "loop-1", start, FormatPprof), []byte("earlier"), 0o600); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pid := range []uint32{10, 20} {
		paths, named, err := writeInterval(dir, interval(pid), outfile.WriterOwns, []Format{FormatCapture})
		if err != nil || len(paths) != 1 {
			t.Fatalf("writeInterval: %q, %v", paths, err)
		}
		if want := intervalPath(dir, "loop-1", named, FormatCapture); paths[0] != want {
			t.Errorf("wrote %s, named by %v: want %s", paths[0], named, want)
		}
		names = append(names, filepath.Base(paths[0]))
		f, err := os.Open(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		c, err := profileio.ReadCapture(f)
		f.Close()
		if err != nil || len(c.Processes) != 1 || c.Processes[0].Pid != pid {
			t.Errorf("%s: %v; want pid %d's interval", paths[0], err, pid)
		}
	}
	if want := []string{"loop-1.20261129T050000.124Z.profd", "loop-1.20261129T050000.125Z.profd"}; !slices.Equal(names, want) {
		t.Errorf("the two intervals starting at %v were named %q, want %q", start, names, want)
	}
	if b, err := os.ReadFile(intervalPath(dir, "loop-1", start, FormatPprof)); err != nil || string(b) != "earlier" {
		t.Errorf("the earlier run's file: %q, %v", b, err)
	}
	sets, _, err := readIntervalSets(dir)
	if err != nil || len(sets) != 3 {
		t.Errorf("--keep reads %d intervals (%v), want 3: %+v", len(sets), err, sets)
	}
}
