package daemon

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestWriteErrorsLoggedOncePerEpisode: an --out that is full fails every flush's writes;
// that is logged once, not at every flush, and once more when writes succeed again; the
// same for the interval files.
func TestWriteErrorsLoggedOncePerEpisode(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d := newDirs(t)
	filler := fillOut(t, d.out)
	target := testenv.Sleeper(t)
	var c Counters
	r := startRun(t, Config{Pids: []uint32{uint32(target.Process.Pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatPprof, FormatCapture}, FlushInterval: time.Second, Counters: &c})
	waitFor(t, "three flushes", 20*time.Second, func() bool { return r.flushes() >= 3 })
	logs := r.logs.String()
	for _, what := range []string{"outputs not written", "interval files not written"} {
		if n := linesWith(logs, "no space left on device"); n != 2 || linesWith(logs, what) != 1 {
			t.Errorf("%d log lines about the full --out over %d flushes, want 2, one saying %q:\n%s", n, r.flushes(), what, logs)
		}
	}
	// Each failed write is counted, though logged once.
	if n := c.Read().OutputWriteErrors; n < 3 {
		t.Errorf("%d output write errors counted over %d flushes, want one a flush", n, r.flushes())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lines saying writes succeed again", 20*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "outputs written again") && strings.Contains(r.logs.String(), "interval files written again")
	})
	r.stop(t)
	if !fileExists(outputPath(d, "sleep", target.Process.Pid, FormatCapture)) {
		t.Error("no capture once the --out had room again")
	}
	if n := linesWith(r.logs.String(), "no space left on device"); n != 2 {
		t.Errorf("%d log lines about the full --out, want 2 (the outputs', the intervals')", n)
	}
}

// linesWith counts the lines of s that hold sub.
func linesWith(s, sub string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// TestFinalWriteFailureFailsTheRun: when the final flush cannot write an output (a full
// --out), no later flush will: that is logged though the episode's first failure already
// was, and the run ends in an error naming the output, so that a script does not go on with
// the profile an earlier flush left.
func TestFinalWriteFailureFailsTheRun(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d := newDirs(t)
	fillOut(t, d.out)
	target := testenv.Sleeper(t)
	r := startRun(t, Config{Pids: []uint32{uint32(target.Process.Pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatPprof, FormatCapture}, FlushInterval: time.Second})
	waitFor(t, "two flushes", 20*time.Second, func() bool { return r.flushes() >= 2 })
	r.cancel()
	<-r.done
	logs := r.logs.String()
	if !errors.Is(r.err, ErrNotWritten) || !strings.Contains(r.err.Error(), "sleep-"+strconv.Itoa(target.Process.Pid)) {
		t.Errorf("run's error %v, want %v naming the output", r.err, ErrNotWritten)
	}
	for _, what := range []string{"final flush: outputs not written", "the last interval's files not written"} {
		if linesWith(logs, what) != 1 {
			t.Errorf("no line saying %q:\n%s", what, logs)
		}
	}
}

// fillOut mounts a small tmpfs on out and fills it, and returns the file that fills it.
func fillOut(t *testing.T, out string) string {
	t.Helper()
	if err := syscall.Mount("tmpfs", out, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(out, syscall.MNT_DETACH) })
	// The write check and the lock file take no data block.
	filler := filepath.Join(out, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 4096))
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	return filler
}

// TestIntervalDirMadeAgain: an interval directory removed while profd runs (a clean-up)
// is made again by the next interval, which is written there, with one warning.
func TestIntervalDirMadeAgain(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d := newDirs(t)
	target := testenv.Sleeper(t)
	r := startRun(t, Config{Pids: []uint32{uint32(target.Process.Pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatCapture}, FlushInterval: time.Second})
	dir := filepath.Join(d.out, IntervalDir)
	waitFor(t, "an interval", 20*time.Second, func() bool { return r.flushes() >= 1 })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the interval directory made again", 20*time.Second, func() bool {
		entries, _ := os.ReadDir(dir)
		return len(entries) > 0
	})
	r.stop(t)
	if n := linesWith(r.logs.String(), "the interval directory was removed"); n != 1 {
		t.Errorf("%d warnings that the interval directory was made again, want 1:\n%s", n, r.logs.String())
	}
	if n := linesWith(r.logs.String(), "interval files not written"); n != 0 {
		t.Errorf("%d interval writes failed, want none:\n%s", n, r.logs.String())
	}
}

// TestOutMadeAgain: an --out removed while profd runs (a clean-up) is made again, its lock
// taken again, and the next flushes write their outputs and intervals there, with one
// warning; an --out whose parent went with it is not (what is made there may be anyone's),
// with one error however many flushes find it gone, and it is used again once it is back.
func TestOutMadeAgain(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	for _, name := range []string{"out", "parent"} {
		t.Run(name, func(t *testing.T) {
			d := newDirs(t)
			out := d.out
			if name == "parent" {
				out = filepath.Join(d.out, "profiles")
			}
			target := testenv.Sleeper(t)
			r := startRun(t, Config{Pids: []uint32{uint32(target.Process.Pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: out,
				Formats: []Format{FormatPprof, FormatCapture}, FlushInterval: time.Second})
			waitFor(t, "an interval", 20*time.Second, func() bool { return r.flushes() >= 1 })
			removed := out
			if name == "parent" {
				removed = d.out
			}
			if err := os.RemoveAll(removed); err != nil {
				t.Fatal(err)
			}
			capture := filepath.Join(out, "sleep-"+strconv.Itoa(target.Process.Pid)+".profd")
			if name == "parent" {
				flushes := r.flushes()
				waitFor(t, "three flushes", 20*time.Second, func() bool { return r.flushes() >= flushes+3 })
				if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("--out made again under a parent that was removed: %v", err)
				}
				if n := linesWith(r.logs.String(), "is not made again"); n != 1 {
					t.Errorf("%d errors that --out is not made again, want 1:\n%s", n, r.logs.String())
				}
				if err := os.MkdirAll(out, 0o755); err != nil { // the operator makes it
					t.Fatal(err)
				}
			}
			waitFor(t, "the outputs and an interval written again", 20*time.Second, func() bool {
				entries, _ := os.ReadDir(filepath.Join(out, IntervalDir))
				return fileExists(capture) && len(entries) > 0
			})
			{
				// A second profd is refused the --out made again: its lock is held.
				if lock, err := lockOut(out, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
					lock.Close()
					t.Error("a second writer locked the --out made again while profd ran")
				}
			}
			r.stop(t)
			logs := r.logs.String()
			if n, want := linesWith(logs, "--out was removed; made again"), map[string]int{"out": 1, "parent": 0}[name]; n != want {
				t.Errorf("%d warnings that --out was made again, want %d:\n%s", n, want, logs)
			}
			if n, want := linesWith(logs, "--out is there again"), map[string]int{"out": 0, "parent": 1}[name]; n != want {
				t.Errorf("%d warnings that --out is there again, want %d:\n%s", n, want, logs)
			}
			if r.err != nil {
				t.Errorf("run: %v", r.err)
			}
		})
	}
}
