package daemon

import (
	"bytes"
	"context"
	"debug/elf"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/procmem"
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

// TestLookupVDSO: the vdso's functions are named from the image the kernel maps, read from
// the process, as debug/elf reads the same image's dynamic symbols; a second process's
// vdso is the same table.
func TestLookupVDSO(t *testing.T) {
	l := newProcLookup(slog.New(slog.DiscardHandler))
	t.Cleanup(l.close)
	vdso := func(pid uint32) attribute.Mapping {
		maps, err := l.Mappings(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range maps {
			if m.Path == "[vdso]" {
				return m
			}
		}
		t.Skip("no vdso mapped")
		return attribute.Mapping{}
	}
	pid := uint32(os.Getpid())
	m := vdso(pid)
	tab, err := l.OpenSymbols(pid, m).Wait(context.Background())
	if err != nil || tab == nil {
		t.Fatalf("the vdso's table: %v", err)
	}
	image, err := procmem.Read(pid, m.Start, int(m.End-m.Start))
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Size == 0 {
			continue
		}
		// A weak alias (clock_gettime) shares its address with the function (__vdso_...).
		if got, _ := tab.Lookup(s.Value + s.Size/2); got != s.Name && got != "__vdso_"+s.Name {
			t.Errorf("%#x, in %s: named %q", s.Value+s.Size/2, s.Name, got)
		}
		named++
	}
	if named < 2 {
		t.Fatalf("the vdso has %d functions", named)
	}

	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	other := uint32(cmd.Process.Pid)
	var om attribute.Mapping
	waitFor(t, "sleep's vdso mapped", 10*time.Second, func() bool {
		maps, _ := l.Mappings(other)
		for _, mm := range maps {
			if mm.Path == "[vdso]" {
				om = mm
				return true
			}
		}
		return false
	})
	if tab2, _ := l.OpenSymbols(other, om).Wait(context.Background()); tab2 != tab {
		t.Error("another process's vdso: a table of its own, not the one kept for the same image")
	}
}
