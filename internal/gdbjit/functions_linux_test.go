package gdbjit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// TestChanges: the functions of an object are reported once, when it is first listed (main
// of lli-14's debug object, with its line rows and declared line), and their addresses
// when it leaves the list. Registers holds while the list is not empty.
func TestChanges(t *testing.T) {
	obj, err := os.ReadFile(mcjitObject)
	if err != nil {
		t.Fatal(err)
	}
	const base = 0x1000
	l := newObjectList(base, 1, obj, uint64(len(obj)))
	r := NewReader(Options{})
	withList(r, 1, base, l)
	added, removed, err := r.Changes(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 || added[0].Name != "main" || added[0].Addr != 0x7fc415d66000 || len(removed) != 0 {
		t.Fatalf("first walk: added %+v, removed %#x; want main at 0x7fc415d66000", added, removed)
	}
	if len(added[0].Lines) == 0 || added[0].FirstLine == 0 {
		t.Errorf("main has %d line rows, declared line %d: want its object's", len(added[0].Lines), added[0].FirstLine)
	}
	for _, row := range added[0].Lines {
		if row.Addr < added[0].Addr || row.Addr >= added[0].Addr+added[0].Size {
			t.Fatalf("row %#x outside main", row.Addr)
		}
	}
	if added, removed, err = r.Changes(1); err != nil || len(added)+len(removed) != 0 {
		t.Fatalf("second walk of the same list: added %d, removed %#x, %v", len(added), removed, err)
	}
	if !r.Registers(1) {
		t.Error("Registers is false with an object listed")
	}
	binary.LittleEndian.PutUint64(l.list.b[16:], 0) // the list is empty now
	if added, removed, err = r.Changes(1); err != nil || len(added) != 0 || !slices.Equal(removed, []uint64{0x7fc415d66000}) {
		t.Fatalf("after the object left the list: added %d, removed %#x, %v", len(added), removed, err)
	}
	if r.Registers(1) {
		t.Error("Registers is true with the list empty")
	}
}

// TestChangesLLI14 names the code of lli-14's default JIT (ORC), which writes no jitdump:
// workloads/callchain.c's four functions, each in the process's anonymous executable
// memory, with line rows from its object. A process taken to have no GDB JIT interface is
// looked at again after noDescriptorRetry, once its address space changed size.
func TestChangesLLI14(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"))
	ir := filepath.Join(t.TempDir(), "callchain.ll")
	if out, err := exec.Command("clang-14", "-O1", "-g", "-S", "-emit-llvm", "-o", ir, "../../workloads/callchain.c").CombinedOutput(); err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	cmd := exec.Command("lli-14", ir, "100000000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	deadline := time.Now().Add(20 * time.Second)
	for !mapsLLVM(pid) { // exec'd, not yet linked: no descriptor to find
		if time.Now().After(deadline) {
			t.Fatal("lli-14 mapped no libLLVM in 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A process found without the interface is taken to have none for noDescriptorRetry;
	// then, its address space grown since, it is looked at again (a JIT library loaded late).
	pages, err := procfs.VMPages(pid)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(Options{})
	r.procs[pid] = &procState{noDesc: fmt.Errorf("gdbjit: %w", ErrNoDescriptor), lookedAt: time.Now(), vmPages: pages + 1}
	if _, _, err := r.Changes(pid); !errors.Is(err, ErrNoDescriptor) {
		t.Fatalf("within noDescriptorRetry of finding none: error %v, want ErrNoDescriptor", err)
	}
	r.procs[pid].lookedAt = time.Now().Add(-noDescriptorRetry)
	named := map[string]bool{}
	for ; len(named) < 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("functions named in 20 s: %v", named)
		}
		added, _, err := r.Changes(pid)
		if err != nil {
			t.Fatal(err)
		}
		maps, _ := procfs.ReadMaps(pid)
		for _, f := range added {
			if !slices.Contains([]string{"leaf", "middle", "outer", "main"}, f.Name) {
				continue
			}
			named[f.Name] = true
			if len(f.Lines) == 0 {
				t.Errorf("%s: no line rows", f.Name)
			}
			if !slices.ContainsFunc(maps, func(m procfs.Mapping) bool {
				return m.Executable() && m.Anonymous() && m.Start <= f.Addr && f.Addr+f.Size <= m.End
			}) {
				t.Errorf("%s at %#x+%d: not in anonymous executable memory", f.Name, f.Addr, f.Size)
			}
		}
	}
}

// mapsLLVM reports whether pid maps a libLLVM library.
func mapsLLVM(pid uint32) bool {
	maps, _ := procfs.ReadMaps(pid)
	return slices.ContainsFunc(maps, func(m procfs.Mapping) bool { return strings.HasPrefix(filepath.Base(m.Path), "libLLVM") })
}
