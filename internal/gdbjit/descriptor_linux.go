package gdbjit

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/profd/profd/internal/procfs"
)

const descriptorSymbol = "__jit_debug_descriptor"

// fileKey names a mapped file: its device and inode as /proc/PID/maps shows them.
type fileKey struct {
	dev   string
	inode uint64
}

// symbolInfo is what one ELF file says about the descriptor: its symbol value and the
// address its first loadable segment is linked at (0 for libraries and PIEs).
type symbolInfo struct {
	ok         bool
	value      uint64
	firstVaddr uint64
}

// candidate is a mapped file that could export the descriptor.
type candidate struct {
	key   fileKey
	path  string
	start uint64 // address of the mapping at file offset 0
}

// candidates lists the files of pid's mappings at file offset 0 that are the executable or a
// libLLVM library.
func candidates(pid uint32) ([]candidate, error) {
	exe, _ := os.Readlink(procfs.Path(pid, "exe"))
	maps, err := procfs.ReadMaps(pid)
	if maps == nil && err != nil {
		return nil, fmt.Errorf("gdbjit: pid %d: %w", pid, err)
	}
	var out []candidate
	seen := map[fileKey]bool{}
	for _, m := range maps {
		if m.Offset != 0 || !strings.HasPrefix(m.Path, "/") {
			continue
		}
		if m.Path != exe && !strings.HasPrefix(filepath.Base(m.Path), "libLLVM") {
			continue
		}
		k := fileKey{dev: m.Dev, inode: m.Inode}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, candidate{key: k, path: m.Path, start: m.Start})
	}
	return out, nil
}

// lookupSymbol reads the descriptor's symbol from the ELF file at path (through the
// process's root, so a target in another mount namespace is read right).
func lookupSymbol(pid uint32, path string) (symbolInfo, error) {
	f, err := elf.Open(procfs.Root(pid) + path)
	if err != nil {
		return symbolInfo{}, fmt.Errorf("gdbjit: %s: %w", path, err)
	}
	defer f.Close()
	var info symbolInfo
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			info.firstVaddr = p.Vaddr &^ 0xfff // the kernel maps whole pages
			break
		}
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return info, nil // no dynamic symbols: not exported here
	}
	for _, s := range syms {
		if s.Name == descriptorSymbol && s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
			info.ok, info.value = true, s.Value
			break
		}
	}
	return info, nil
}
