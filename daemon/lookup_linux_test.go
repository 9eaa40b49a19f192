package daemon

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/elfsym"
)

// TestLookupOpenSymbolsReplaced: once a target's mapping is split (mprotect of part of it:
// /proc/PID/map_files has no entry for the range profd knows), its file is opened by path,
// and only while the path names the file mapped. A FIFO moved over it is refused at once
// (OpenSymbols runs under the run's lock: a blocked open would hang every drain, flush and
// the stop), and so is a link to another user's file (root would read its symbols into the
// target's profile).
func TestLookupOpenSymbolsReplaced(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	l := newProcLookup(slog.New(slog.DiscardHandler))
	t.Cleanup(l.close)

	var m attribute.Mapping
	waitFor(t, "the program's code mapped", 10*time.Second, func() bool {
		maps, _ := l.Mappings(pid)
		for _, mm := range maps {
			if mm.Path == prog && mm.Executable {
				m = mm
				return true
			}
		}
		return false
	})
	// open runs OpenSymbols for mapping m, failing if it blocks for 5 s (the FIFO at prog is
	// then opened for writing, which lets it go on).
	open := func(m attribute.Mapping) *elfsym.File {
		t.Helper()
		done := make(chan *elfsym.File, 1)
		go func() { done <- l.OpenSymbols(pid, m) }()
		select {
		case f := <-done:
			return f
		case <-time.After(5 * time.Second):
			if fd, err := unix.Open(prog, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
				defer unix.Close(fd)
			}
			<-done
			t.Fatal("OpenSymbols blocked for 5 s")
			return nil
		}
	}
	read := func(f *elfsym.File) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := f.Wait(ctx)
		return err
	}

	if f := open(m); f == nil {
		t.Fatal("the mapped file: not opened")
	} else if err := read(f); err != nil {
		t.Fatalf("the mapped file: %v", err)
	}
	split := m
	split.End += 0x1000 // a range map_files has no entry for
	if f := open(split); f == nil {
		t.Fatal("the mapped file, by path: not opened")
	}

	if err := os.Rename(prog, filepath.Join(dir, "old")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "fifo"), prog); err != nil {
		t.Fatal(err)
	}
	if f := open(split); f != nil {
		t.Error("a FIFO at the mapped file's path: opened")
	}

	// Another user's program, which the target's user may not read.
	other := filepath.Join(t.TempDir(), "other")
	b, err = os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, b, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Remove(prog)
	rel, err := filepath.Rel(dir, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, prog); err != nil { // relative: it stays inside the target's root
		t.Fatal(err)
	}
	if f := open(split); f != nil {
		t.Error("a link to another file at the mapped file's path: opened")
	}
	// The mapping as it is reaches the file mapped, whatever its path names now.
	if os.Geteuid() == 0 {
		if f := open(m); f == nil {
			t.Error("the mapped file through map_files: not opened")
		}
	}
}
