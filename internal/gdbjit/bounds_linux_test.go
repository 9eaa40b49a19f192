package gdbjit

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/clock"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/procmem"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
)

// mcjitObject is a real debug object lli-14 registered (jitmap's test data).
const mcjitObject = "../../jitmap/testdata/matmul-mcjit-debug.o"

// objectList is a fake address space: a descriptor at base listing n entries, each naming
// an object of size bytes at objAddr (one object, so that no test allocates n of them).
type objectList struct {
	list    memory
	objAddr uint64
	obj     []byte
	read    uint64 // bytes of objects read
}

func newObjectList(base uint64, n int, obj []byte, size uint64) *objectList {
	b := listMemory(base, n)
	objAddr := uint64(1) << 40
	for i := 0; i < n; i++ {
		e := b[descriptorSize+i*entrySize:]
		binary.LittleEndian.PutUint64(e[16:], objAddr)
		binary.LittleEndian.PutUint64(e[24:], size)
	}
	return &objectList{list: memory{base: base, b: b}, objAddr: objAddr, obj: obj}
}

func (l *objectList) readMem(pid uint32, addr uint64, size int) ([]byte, error) {
	if addr != l.objAddr {
		return l.list.read(pid, addr, size)
	}
	if size > len(l.obj) {
		return nil, errUnmapped
	}
	l.read += uint64(size)
	return l.obj[:size], nil
}

// readFrom has r read through read instead of a process's memory, under procmem.Guard still:
// on the guard's goroutine, timed by it.
func (r *Reader) readFrom(read func(pid uint32, addr uint64, size int) ([]byte, error)) {
	r.guard = func(pid uint32, f func(procmem.ReadFunc)) (time.Duration, error) {
		return procmem.Guard(pid, func(procmem.ReadFunc) {
			f(func(addr uint64, size int) ([]byte, error) { return read(pid, addr, size) })
		})
	}
}

// withList has r walk l for pid, its descriptor at base.
func withList(r *Reader, pid uint32, base uint64, l *objectList) {
	r.readFrom(l.readMem)
	r.procs[pid] = &procState{descAddr: base, objects: map[objectKey]jitmap.DebugInfo{}}
}

// TestReadBound: a list of 65 536 objects of 64 MiB each (what a descriptor may name) is
// not read whole in one walk: at most MaxReadBytes a walk, the rest by later walks.
func TestReadBound(t *testing.T) {
	const base = 0x1000
	l := newObjectList(base, DefaultMaxEntries, make([]byte, DefaultMaxObjectBytes), DefaultMaxObjectBytes)
	r := NewReader(Options{})
	withList(r, 1, base, l)
	for walk := 0; walk < 3; walk++ {
		l.read = 0
		if _, err := r.Debug(1); err != nil {
			t.Fatal(err)
		}
		if l.read > DefaultMaxReadBytes || l.read == 0 {
			t.Fatalf("walk %d read %d bytes of objects, want some, at most %d", walk, l.read, DefaultMaxReadBytes)
		}
	}
	if st := r.Stats(); st.BadObjects != 3*DefaultMaxReadBytes/DefaultMaxObjectBytes || st.Deferred == 0 {
		t.Errorf("stats %+v: want the objects of three walks read (and found bad), the rest deferred", st)
	}
}

// TestReadBoundWalks reads a list past MaxReadBytes over several walks, and ends with what
// an unbounded reader reads at once.
func TestReadBoundWalks(t *testing.T) {
	obj, err := os.ReadFile(mcjitObject)
	if err != nil {
		t.Fatal(err)
	}
	const base, n = 0x1000, 8
	size := uint64(len(obj))
	want := NewReader(Options{})
	withList(want, 1, base, newObjectList(base, n, obj, size))
	all, err := want.Debug(1)
	if err != nil || len(all.Lines) == 0 {
		t.Fatalf("unbounded: %d rows, %v", len(all.Lines), err)
	}

	l := newObjectList(base, n, obj, size)
	r := NewReader(Options{MaxObjectBytes: size, MaxReadBytes: 3 * size})
	withList(r, 1, base, l)
	var info jitmap.DebugInfo
	for walk, objects := range []int{3, 3, 2, 0} {
		l.read = 0
		if info, err = r.Debug(1); err != nil {
			t.Fatal(err)
		}
		if l.read != uint64(objects)*size {
			t.Errorf("walk %d read %d bytes, want %d objects of %d", walk, l.read, objects, size)
		}
	}
	if len(info.Lines) != len(all.Lines) || len(info.Subprograms) != len(all.Subprograms) {
		t.Errorf("%d rows, %d subprograms; unbounded, %d and %d", len(info.Lines), len(info.Subprograms), len(all.Lines), len(all.Subprograms))
	}
	if st := r.Stats(); st.Objects != n || st.Deferred != 5+2 {
		t.Errorf("stats %+v: want %d objects decoded, 7 deferrals", st, n)
	}
}

// TestHeldBound keeps decoded objects up to MaxHeldBytesPerProcess for one process and
// MaxHeldBytes for all, and gives a process's share back when it is forgotten.
func TestHeldBound(t *testing.T) {
	obj, err := os.ReadFile(mcjitObject)
	if err != nil {
		t.Fatal(err)
	}
	one, err := jitmap.DebugObject(obj, 0)
	if err != nil {
		t.Fatal(err)
	}
	per := heldBytes(one)
	const base, n = 0x1000, 4
	r := NewReader(Options{MaxHeldBytesPerProcess: 2*per + per/2, MaxHeldBytes: 3 * per})
	rows := func(pid uint32) int {
		t.Helper()
		withList(r, pid, base, newObjectList(base, n, obj, uint64(len(obj))))
		info, err := r.Debug(pid)
		if err != nil {
			t.Fatal(err)
		}
		return len(info.Lines)
	}
	if got := rows(1); got != 2*len(one.Lines) {
		t.Errorf("pid 1: %d rows, want two objects' %d", got, 2*len(one.Lines))
	}
	if got := rows(2); got != len(one.Lines) {
		t.Errorf("pid 2: %d rows, want the one object's %d left of MaxHeldBytes", got, len(one.Lines))
	}
	if r.held != 3*per {
		t.Errorf("%d bytes held, want %d", r.held, 3*per)
	}
	if st := r.Stats(); st.Dropped != 2+3 {
		t.Errorf("stats %+v: want 5 objects dropped", st)
	}
	r.Forget(1)
	if got := rows(3); got != 2*len(one.Lines) {
		t.Errorf("pid 3, pid 1 forgotten: %d rows, want two objects' %d", got, 2*len(one.Lines))
	}
	r.Forget(2)
	r.Forget(3)
	if r.held != 0 {
		t.Errorf("%d bytes held with every process forgotten", r.held)
	}
}

// mapLibrary maps a copy of an ELF file named like LLVM's library in this process, two
// pages of it at least, as a JIT maps libLLVM.
func mapLibrary(t *testing.T) (path string, m procfs.Mapping) {
	t.Helper()
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "libLLVM-test.so")
	if err := os.WriteFile(path, append(b, make([]byte, 2*os.Getpagesize())...), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 2*os.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	cands, err := candidates(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	maps, _ := procfs.ReadMaps(uint32(os.Getpid()))
	for _, c := range cands {
		if c.path == path {
			for _, m := range maps {
				if m.Start == c.start {
					return path, m
				}
			}
		}
	}
	t.Fatalf("%s is not a candidate", path)
	return "", procfs.Mapping{}
}

// lookupWithin runs lookupSymbol for c, failing t if it has not returned within 5 s (a
// blocked open of a FIFO at fifo, which is then opened for writing to let it go on).
func lookupWithin(t *testing.T, fifo string, c candidate) (symbolInfo, error) {
	t.Helper()
	type result struct {
		info symbolInfo
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := lookupSymbol(uint32(os.Getpid()), c)
		done <- result{info, err}
	}()
	select {
	case r := <-done:
		return r.info, r.err
	case <-time.After(5 * time.Second):
		if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			defer unix.Close(fd)
		}
		<-done
		t.Fatal("lookupSymbol blocked for 5 s")
		return symbolInfo{}, nil
	}
}

// TestLookupSymbolReplaced: a candidate's file is opened as it is mapped. When its mapping
// was split (map_files has no entry for it any more), a FIFO or another file moved over its
// path is refused, and at once: the Reader's lock is every target's.
func TestLookupSymbolReplaced(t *testing.T) {
	path, m := mapLibrary(t)
	c := candidate{key: fileKey{dev: m.Dev, inode: m.Inode}, id: m.ID(), path: path, start: m.Start, end: m.End}
	if _, err := lookupWithin(t, "", c); err != nil {
		t.Fatalf("the mapped file: %v", err)
	}
	page := uint64(os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MPROTECT, uintptr(m.Start+page), uintptr(page), unix.PROT_NONE); errno != 0 {
		t.Fatal(os.NewSyscallError("mprotect", errno))
	}
	if _, err := lookupWithin(t, "", c); err != nil {
		t.Fatalf("the mapped file, by path: %v", err)
	}
	fifo := filepath.Join(filepath.Dir(path), "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, path); err != nil {
		t.Fatal(err)
	}
	if _, err := lookupWithin(t, path, c); !errors.Is(err, procfs.ErrNotRegular) {
		t.Errorf("a FIFO at the path: %v, want procfs.ErrNotRegular", err)
	}
	os.Remove(path)
	if err := os.Symlink("/bin/true", path); err != nil {
		t.Fatal(err)
	}
	if _, err := lookupWithin(t, "", c); !errors.Is(err, procfs.ErrReplaced) {
		t.Errorf("a link to another file at the path: %v, want procfs.ErrReplaced", err)
	}
}

// TestLookupSymbolDeleted reads a deleted library's symbols through map_files: the candidate
// is the file mapped, not what its path names now.
func TestLookupSymbolDeleted(t *testing.T) {
	testenv.Requires(t, testenv.Root) // map_files
	path, _ := mapLibrary(t)
	os.Remove(path)
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	cands, err := candidates(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cands {
		if c.path == path {
			if _, err := lookupWithin(t, path, c); err != nil {
				t.Errorf("a deleted library: %v", err)
			}
			return
		}
	}
	t.Errorf("a deleted library is no candidate")
}

// TestWalkTook: WalkTook is the CPU time the last walk of a list took, every entry read and
// every object, by each of the three walks, and by a walk of a list past MaxEntries, refused once
// read up to it, not the time its reads wait; 0 for a process never walked.
func TestWalkTook(t *testing.T) {
	const base, n = 0x1000, 20
	const perRead = time.Millisecond
	l := newObjectList(base, n, make([]byte, 64), 64)
	r := NewReader(Options{})
	withList(r, 1, base, l)
	costly := func(pid uint32, addr uint64, size int) ([]byte, error) {
		for start := clock.ThreadCPU(); clock.ThreadCPU()-start < perRead; { // CPU time: a read's cost
		}
		return l.readMem(pid, addr, size)
	}
	r.readFrom(costly)
	if got := r.WalkTook(1); got != 0 {
		t.Errorf("before a walk: %v, want 0", got)
	}
	// The descriptor and n entries are read; the 64-byte object, not an ELF object, once.
	for _, walk := range []struct {
		name string
		do   func() error
	}{
		{"Debug", func() error { _, err := r.Debug(1); return err }},
		{"FrameSections", func() error { _, err := r.FrameSections(1); return err }},
		{"Changes", func() error { _, _, err := r.Changes(1); return err }},
	} {
		if err := walk.do(); err != nil {
			t.Fatalf("%s: %v", walk.name, err)
		}
		if got, least := r.WalkTook(1), (n+1)*perRead; got < least {
			t.Errorf("after %s: %v, want at least %v (%d reads of %v)", walk.name, got, least, n+1, perRead)
		}
	}
	short := NewReader(Options{MaxEntries: n / 2})
	withList(short, 1, base, l)
	short.readFrom(costly)
	if _, err := short.Debug(1); !errors.Is(err, ErrBadList) {
		t.Fatalf("a list past MaxEntries: %v, want ErrBadList", err)
	}
	if got, least := short.WalkTook(1), (n/2+1)*perRead; got < least {
		t.Errorf("a list past MaxEntries: %v, want at least %v", got, least)
	}
	// A walk whose reads wait (a busy machine, a slow process) without using a core costs
	// what it computes, not what it waits.
	waiting := NewReader(Options{})
	withList(waiting, 1, base, l)
	waiting.readFrom(func(pid uint32, addr uint64, size int) ([]byte, error) {
		time.Sleep(perRead)
		return l.readMem(pid, addr, size)
	})
	if _, err := waiting.Debug(1); err != nil {
		t.Fatal(err)
	}
	if got, most := waiting.WalkTook(1), time.Duration(n+1)*perRead/2; got >= most {
		t.Errorf("a walk whose %d reads each waited %v: %v of CPU, want under %v", n+1, perRead, got, most)
	}
}

// TestObjectGroups: a walk reads its new objects a group at a time, each group under a guard
// of its own and of at most MaxObjectBytes (one object at least): it holds one group's bytes
// at a time, not all it reads, and many small objects cost one guard.
func TestObjectGroups(t *testing.T) {
	const base, n = 0x1000, 10
	for _, c := range []struct {
		size   uint64
		groups int
	}{{100, 1}, {250, 3}, {600, n}, {1000, n}} {
		l := newObjectList(base, n, make([]byte, c.size), c.size)
		for _, walk := range []struct {
			name string
			do   func(r *Reader) error
		}{
			{"Debug", func(r *Reader) error { _, err := r.Debug(1); return err }},
			{"Changes", func(r *Reader) error { _, _, err := r.Changes(1); return err }},
		} {
			r := NewReader(Options{MaxObjectBytes: 1000})
			withList(r, 1, base, l)
			guards, inner := 0, r.guard
			r.guard = func(pid uint32, f func(procmem.ReadFunc)) (time.Duration, error) {
				guards++
				return inner(pid, f)
			}
			if err := walk.do(r); err != nil {
				t.Fatal(err)
			}
			if want := 1 + c.groups; guards != want { // the list's, then the objects'
				t.Errorf("%s of %d objects of %d bytes: %d guards, want %d", walk.name, n, c.size, guards, want)
			}
		}
	}
}

// TestObjectsStalled: a walk whose objects' reads do not end in time fails with ErrStalled
// and keeps nothing of that walk; the next walk reads them.
func TestObjectsStalled(t *testing.T) {
	const base, n = 0x1000, 4
	l := newObjectList(base, n, make([]byte, 64), 64)
	r := NewReader(Options{})
	withList(r, 1, base, l)
	guards, inner := 0, r.guard
	r.guard = func(pid uint32, f func(procmem.ReadFunc)) (time.Duration, error) {
		if guards++; guards == 2 { // the objects' of the first walk
			return 0, procmem.ErrStalled
		}
		return inner(pid, f)
	}
	if _, _, err := r.Changes(1); !errors.Is(err, procmem.ErrStalled) {
		t.Fatalf("objects not read in time: %v, want ErrStalled", err)
	}
	if l.read != 0 {
		t.Errorf("%d bytes of objects read by a walk whose reads were left", l.read)
	}
	if _, _, err := r.Changes(1); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.BadObjects != n || l.read != n*64 {
		t.Errorf("the next walk: %d objects tried, %d bytes read; want %d, %d", st.BadObjects, l.read, n, n*64)
	}
}
