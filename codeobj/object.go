package codeobj

import "sort"

// Source says where a code object's record came from.
type Source uint8

const (
	SourceUnknown     Source = iota
	SourceFIFO               // the profd FIFO (jitdump or perf-map stream)
	SourceJitdumpFile        // a jitdump file the JIT wrote (jit-PID.dump)
	SourcePerfMapFile        // /tmp/perf-PID.map
	SourceGDBJIT             // an object the JIT registered with the GDB JIT interface
)

func (s Source) String() string {
	switch s {
	case SourceFIFO:
		return "fifo"
	case SourceJitdumpFile:
		return "jitdump-file"
	case SourcePerfMapFile:
		return "perf-map-file"
	case SourceGDBJIT:
		return "gdb-jit"
	}
	return "unknown"
}

// LineEntry maps a code address to the source position of the code that starts there.
type LineEntry struct {
	Addr          uint64 // absolute code address (LLVM 14's +0x40 bias already removed)
	File          string
	Line          uint32
	Discriminator uint32
}

// Object is one function's machine code as a JIT emitted it at one place and time.
// Times are CLOCK_MONOTONIC nanoseconds, the clock perf samples are taken with.
type Object struct {
	Name      string
	Addr      uint64      // first byte, in the target's address space
	Size      uint64      // bytes
	Code      []byte      // the code bytes; nil where unknown, else len(Code) == Size
	Lines     []LineEntry // ascending Addr; nil where unknown
	LoadNs    int64       // when the code became live; 0 when unknown (treated as "always")
	UnloadNs  int64       // when it was unloaded or moved away; 0 while live
	CodeIndex uint64      // the JIT's unique id for this code (jitdump code_index); 0 if none
	// Version numbers the loads a Map applied, from 1: the ended copy of an object keeps
	// it, a duplicate load merged into an object does not change it, a move makes a new
	// one. 0 for an object no Map holds.
	Version uint64
	Source  Source
	// FirstLine is the line the function is declared on (its DWARF subprogram's, from which
	// LLVM's sample profiles count line offsets); 0 where unknown.
	FirstLine uint32
}

// Estimated bytes an object and a line entry take beyond their variable parts.
const (
	objectOverhead = 256 // the Object, its place in the index, the ended copy's pointer
	lineOverhead   = 48
)

// HeldBytes estimates the memory the object holds: its name, code bytes and line table,
// and a fixed overhead. Budgets (MapOptions.MaxBytesPerPid) count it.
func (o *Object) HeldBytes() int64 {
	n := int64(objectOverhead + len(o.Name) + len(o.Code))
	for _, l := range o.Lines {
		n += int64(lineOverhead + len(l.File))
	}
	return n
}

// Contains reports whether ip falls inside the object's code range.
func (o *Object) Contains(ip uint64) bool {
	return ip >= o.Addr && ip-o.Addr < o.Size
}

// LiveAt reports whether the object owned its range at time atNs.
func (o *Object) LiveAt(atNs int64) bool {
	return (o.LoadNs == 0 || atNs >= o.LoadNs) && (o.UnloadNs == 0 || atNs < o.UnloadNs)
}

// CoveringLine returns the index of the last entry of lines (ascending Addr) at or below
// addr, or 0 when every entry lies above it; lines must not be empty.
func CoveringLine(lines []LineEntry, addr uint64) int {
	i := sort.Search(len(lines), func(i int) bool { return lines[i].Addr > addr })
	if i == 0 {
		return 0
	}
	return i - 1
}
