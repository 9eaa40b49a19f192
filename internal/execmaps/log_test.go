package execmaps

import (
	"fmt"
	"log/slog"
	"math"
	"testing"

	perf "github.com/elastic/go-perf"
)

func mmap(pid uint32, start, end, off uint64, path string, ino uint64, ns int64) *perf.Mmap2Record {
	r := &perf.Mmap2Record{Pid: pid, Tid: pid, Addr: start, Len: end - start, PageOffset: off, Filename: path, Inode: ino, MajorID: 8, MinorID: 1}
	r.Time = uint64(ns)
	return r
}

func show(ms []Mapping) string {
	s := ""
	for _, m := range ms {
		s += fmt.Sprintf("[%#x-%#x %s+%#x] ", m.Start, m.End, m.Path, m.Offset)
	}
	return s
}

// TestLayOut: a later mapping replaces what it overlaps of earlier ones, which keep the
// rest, a file's offset moved with its start.
func TestLayOut(t *testing.T) {
	made := []mapping{
		{Mapping{Start: 0x1000, End: 0x5000, Offset: 0, Path: "/a", Ino: 1}, 1},
		{Mapping{Start: 0x8000, End: 0x9000, Path: "/c", Ino: 3}, 4},
		{Mapping{Start: 0x2000, End: 0x3000, Path: ""}, 2},
		{Mapping{Start: 0x4000, End: 0x8800, Offset: 0x10000, Path: "/b", Ino: 2}, 3}, // made before /c
	}
	got := show(layOut(nil, made))
	want := "[0x1000-0x2000 /a+0x0] [0x2000-0x3000 +0x0] [0x3000-0x4000 /a+0x2000] [0x4000-0x8000 /b+0x10000] [0x8000-0x9000 /c+0x0] "
	if got != want {
		t.Errorf("layOut =\n%s\nwant\n%s", got, want)
	}
	// A process's maps read from /proc lie under every record.
	under := []mapping{
		{Mapping{Start: 0x1000, End: 0x3000, Path: "/u", Ino: 5}, math.MinInt64},
		{Mapping{Start: 0x6000, End: 0x7000, Path: "/v", Ino: 6}, math.MinInt64},
	}
	made = []mapping{{Mapping{Start: 0x2000, End: 0x6800, Path: "/m", Ino: 7}, 5}}
	got = show(layOut(under, made))
	want = "[0x1000-0x2000 /u+0x0] [0x2000-0x6800 /m+0x0] [0x6800-0x7000 /v+0x800] "
	if got != want {
		t.Errorf("layOut with what /proc told =\n%s\nwant\n%s", got, want)
	}
	if layOut(nil, nil) != nil {
		t.Error("layOut of nothing is not nil")
	}
}

// TestExecForkExit: a process's mappings are those it made, the program it runs now's over
// what it ran before its exec, and a forked child's are its parent's up to the fork and its
// own over them (the file each runs is its latest exec's, or its parent's); a pid reused by a new process starts
// empty; an exited process's are let go of keepAfterExit later.
func TestExecForkExit(t *testing.T) {
	l := &Log{max: 100, procs: map[uint32]*process{}, paths: map[string]string{}}
	exec := func(pid uint32, ns int64) *perf.CommRecord {
		r := &perf.CommRecord{Pid: pid, Tid: pid, NewName: "x"}
		r.Misc = 1 << 13 // PERF_RECORD_MISC_COMM_EXEC
		r.Time = uint64(ns)
		return r
	}
	fork := func(pid, parent uint32, ns int64) *perf.ForkRecord {
		return &perf.ForkRecord{Pid: pid, Ppid: parent, Tid: pid, Ptid: parent, Time: uint64(ns)}
	}
	for _, r := range []perf.Record{
		mmap(10, 0x1000, 0x2000, 0, "/old", 1, 10),
		exec(10, 20),
		mmap(10, 0x1000, 0x2000, 0, "/bin/sh", 2, 21),
		mmap(10, 0x3000, 0x4000, 0, "/libc", 3, 22),
		fork(11, 10, 30),
		mmap(10, 0x5000, 0x6000, 0, "/late", 4, 31), // the parent's, after the fork
		mmap(11, 0x7000, 0x8000, 0, "/dl", 5, 32),
		fork(12, 10, 40),
		exec(12, 41),
		mmap(12, 0x1000, 0x2000, 0, "/bin/true", 6, 42),
		mmap(13, 0x1000, 0x2000, 0, "/gone", 7, 5),
		fork(13, 10, 50), // pid 13 reused
		// Read out of order, from two CPUs' rings: the exec and mappings of a process
		// before its fork, and the exit of the earlier process of its pid after them.
		exec(14, 72),
		mmap(14, 0x1000, 0x2000, 0, "/bin/env", 8, 73),
		fork(14, 10, 70),
		&perf.ExitRecord{Pid: 14, Tid: 14, Time: 3},
	} {
		l.apply(r)
	}
	for pid, want := range map[uint32]string{
		10: "[0x1000-0x2000 /bin/sh+0x0] [0x3000-0x4000 /libc+0x0] [0x5000-0x6000 /late+0x0] ",
		11: "[0x1000-0x2000 /bin/sh+0x0] [0x3000-0x4000 /libc+0x0] [0x7000-0x8000 /dl+0x0] ",
		12: "[0x1000-0x2000 /bin/true+0x0] [0x3000-0x4000 /libc+0x0] [0x5000-0x6000 /late+0x0] ",
		13: "[0x1000-0x2000 /bin/sh+0x0] [0x3000-0x4000 /libc+0x0] [0x5000-0x6000 /late+0x0] ",
		14: "[0x1000-0x2000 /bin/env+0x0] [0x3000-0x4000 /libc+0x0] [0x5000-0x6000 /late+0x0] ",
	} {
		if got := show(l.Mappings(pid)); got != want {
			t.Errorf("pid %d: %s\nwant %s", pid, got, want)
		}
	}
	for pid, want := range map[uint32]int64{10: 0, 11: 30, 13: 50, 14: 70, 15: 0} {
		if got := l.Born(pid); got != want {
			t.Errorf("pid %d born at %d, want %d", pid, got, want)
		}
	}
	for pid, want := range map[uint32]string{10: "/bin/sh", 11: "/bin/sh", 12: "/bin/true", 13: "/bin/sh", 14: "/bin/env", 15: ""} {
		if got, _ := l.Executable(pid); got != want {
			t.Errorf("pid %d runs %q, want %q", pid, got, want)
		}
	}
	if kept := l.kept; kept != 7 {
		t.Errorf("%d mappings kept, want 7 (the reused pid's let go of)", kept)
	}
	if l.procs[14].exitNs != 0 {
		t.Errorf("pid 14 exited, by the exit record of the process its pid had before")
	}
	l.apply(&perf.ExitRecord{Pid: 12, Tid: 12, Time: 60})
	l.trim(61)
	if got := l.Mappings(12); got != nil {
		t.Errorf("an exited process's mappings kept past their time: %s", show(got))
	}
	if _, ok := l.paths["/bin/true"]; ok || len(l.paths) != l.kept {
		t.Errorf("the interned paths %v outlive the mappings kept", l.paths)
	}
	if got := l.Mappings(10); len(got) != 3 {
		t.Errorf("a running process's mappings let go of: %s", show(got))
	}
}

// TestMaxMappings: past the bound, the exited processes' mappings go first, then new ones
// are not kept, and counted.
func TestMaxMappings(t *testing.T) {
	l := &Log{max: 3, procs: map[uint32]*process{}, paths: map[string]string{}}
	l.log = slog.New(slog.DiscardHandler)
	l.apply(mmap(1, 0x1000, 0x2000, 0, "/a", 1, 1))
	l.apply(mmap(1, 0x2000, 0x3000, 0, "/b", 2, 2))
	l.apply(&perf.ExitRecord{Pid: 1, Tid: 1, Time: 3})
	l.apply(mmap(2, 0x1000, 0x2000, 0, "/c", 3, 4))
	l.apply(mmap(2, 0x2000, 0x3000, 0, "/d", 4, 5)) // over: pid 1's go
	l.apply(mmap(2, 0x3000, 0x4000, 0, "/e", 5, 6))
	l.apply(mmap(2, 0x4000, 0x5000, 0, "/f", 6, 7)) // over, and nothing exited: dropped
	kept, dropped := l.kept, l.dropped
	if kept != 3 || dropped != 1 || l.procs[1] != nil {
		t.Errorf("kept %d, dropped %d, pid 1 kept %v; want 3, 1, false", kept, dropped, l.procs[1] != nil)
	}
}
