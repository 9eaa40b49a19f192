package attribute

import (
	"errors"
	"sync"
	"testing"

	"github.com/profd/profd/internal/elfsym"
)

// anonBase is where fakeLookup's processes have anonymous executable memory (JIT memory):
// 4 GiB of it.
const anonBase = 0x7f0000000000

// fakeLookup answers for processes from its tables; a pid it has no mappings for is gone.
type fakeLookup struct {
	mu       sync.Mutex
	images   map[uint32]string
	mappings map[uint32][]Mapping
	threads  map[uint32]string
	kernel   map[uint64]string
	info     map[uint32]ProcessInfo
	// openSymbols, when set, opens a mapping's file; else files have no symbols.
	openSymbols func(pid uint32, m Mapping) *elfsym.File
	opened      []Mapping // every mapping OpenSymbols was asked for
	mapsRead    int       // calls of Mappings
	made        map[uint32][]Mapping
}

// newFakeLookup makes a lookup whose processes pids have anonymous memory at anonBase.
func newFakeLookup(pids ...uint32) *fakeLookup {
	f := &fakeLookup{images: map[uint32]string{}, mappings: map[uint32][]Mapping{}, threads: map[uint32]string{},
		kernel: map[uint64]string{}}
	for _, pid := range pids {
		f.images[pid] = "jit"
		f.mappings[pid] = []Mapping{{Start: anonBase, End: anonBase + 1<<32, Executable: true}}
	}
	return f
}

func (f *fakeLookup) Image(pid uint32) string { return f.images[pid] }

func (f *fakeLookup) Executable(pid uint32) string {
	if f.images[pid] == "" {
		return ""
	}
	return "/usr/bin/" + f.images[pid]
}

func (f *fakeLookup) Mappings(pid uint32) ([]Mapping, error) {
	f.mapsRead++
	m, ok := f.mappings[pid]
	if !ok {
		return nil, errors.New("no such process")
	}
	return append([]Mapping(nil), m...), nil
}

func (f *fakeLookup) MadeMappings(pid uint32) []Mapping { return f.made[pid] }

func (f *fakeLookup) OpenSymbols(pid uint32, m Mapping) *elfsym.File {
	f.opened = append(f.opened, m)
	if f.openSymbols == nil {
		return nil
	}
	return f.openSymbols(pid, m)
}

func (f *fakeLookup) ThreadName(pid, tid uint32) string {
	if name, ok := f.threads[tid]; ok {
		return name
	}
	return f.images[pid]
}

func (f *fakeLookup) KernelSymbol(addr uint64) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, ok := f.kernel[addr]
	return name, ok
}

func (f *fakeLookup) ProcessInfo(pid uint32) ProcessInfo { return f.info[pid] }

// TestGoneProcessMappings: a process gone is placed by the mappings read while it lived,
// and where they hold nothing, by those its mmap records told of (which may lack what it
// inherited: they never replace the others).
func TestGoneProcessMappings(t *testing.T) {
	const pid = 7
	f := newFakeLookup()
	f.mappings[pid] = []Mapping{{Start: 0x1000, End: 0x2000, Path: "/usr/bin/postgres", Executable: true}}
	m := procMaps{pid: pid, look: f}
	if name, _ := m.lookup(0x1800); name != "/usr/bin/postgres" {
		t.Fatalf("a live process's address in %q", name)
	}
	delete(f.mappings, pid) // it exits
	f.made = map[uint32][]Mapping{pid: {{Start: 0x8000, End: 0x9000, Path: "/usr/lib/llvmjit.so", Executable: true}}}
	m.read = false // the next drain
	for ip, want := range map[uint64]string{0x8800: "/usr/lib/llvmjit.so", 0x1800: "/usr/bin/postgres", 0x5000: "[unknown]"} {
		if name, _ := m.lookup(ip); name != want {
			t.Errorf("the gone process's address %#x in %q, want %q", ip, name, want)
		}
		if name, _ := m.lookupCached(ip); name != want {
			t.Errorf("lookupCached: the gone process's address %#x in %q, want %q", ip, name, want)
		}
	}
}
