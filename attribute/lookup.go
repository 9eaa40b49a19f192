package attribute

import "github.com/profd/profd/internal/elfsym"

// Lookup answers what attribution needs to know of a live process. The daemon's reads
// /proc; a test's answers from a table. Counts calls it under its caller's serialisation,
// except KernelSymbol, which Snapshot.Name calls and which must be safe for concurrent use.
type Lookup interface {
	// Image names process pid's executable (its base name), "" when it is not known.
	Image(pid uint32) string
	// Executable is the path of the file process pid runs, "" when it is not known.
	Executable(pid uint32) string
	// Mappings returns process pid's mappings, ascending by start. When the process is gone
	// it returns nil and an error.
	Mappings(pid uint32) ([]Mapping, error)
	// MadeMappings returns the executable mappings process pid made, as the kernel
	// reported them, for a process gone: nil when not known. They may be only some of
	// its mappings (not those it inherited from a parent older than the records), so
	// they only place the addresses the mappings read while it lived do not.
	MadeMappings(pid uint32) []Mapping
	// OpenSymbols starts reading the symbols of the file mapping m of process pid holds,
	// in the background; nil when the file cannot be opened, or is not the one m maps.
	OpenSymbols(pid uint32, m Mapping) *elfsym.File
	// ThreadName is the name of thread tid of process pid.
	ThreadName(pid, tid uint32) string
	// KernelSymbol names the kernel text address addr; false when it cannot.
	KernelSymbol(addr uint64) (string, bool)
	// ProcessInfo is what is known of process pid beyond its image: its command line, cgroup,
	// container and service; zero fields when not known.
	ProcessInfo(pid uint32) ProcessInfo
}

// ProcessInfo describes where a process runs and who it is, for its capture's process
// (profileio.Process has the same fields, and says what each holds).
type ProcessInfo struct {
	CommandLine             []string
	CgroupPath, ContainerID string
	ServiceName             string
}

// Mapping is a range of a process's address space.
type Mapping struct {
	Start, End uint64
	Offset     uint64 // the file offset of Start
	// Path is the file as the process names it, "[heap]", "[vdso]" and the like, or ""
	// for anonymous memory.
	Path       string
	Executable bool
	// Dev and Inode identify the mapped file (st_dev and st_ino), zero when not known: a
	// file opened by Path later must be this one.
	Dev, Inode uint64
	// ELF: the file is an ELF image though Path is a name JIT memory takes (a memfd, a
	// file of /dev/shm: a program run from one), so its code is named by its symbols.
	ELF bool
}

// find returns the mapping of maps (ascending by start) that addr lies in.
func find(maps []Mapping, addr uint64) (*Mapping, bool) {
	lo, hi := 0, len(maps)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if maps[mid].End > addr {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo < len(maps) && maps[lo].Start <= addr {
		return &maps[lo], true
	}
	return nil, false
}
