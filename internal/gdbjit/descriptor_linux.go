package gdbjit

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/profd/profd/internal/elfsym"
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
	key        fileKey
	id         procfs.FileID
	path       string
	start, end uint64 // the mapping at file offset 0
}

// candidates lists the files of pid's mappings at file offset 0 that are the executable or a
// libLLVM library (deleted or not: lookupSymbol opens the one mapped).
func candidates(pid uint32) ([]candidate, error) {
	exe := procfs.ExePath(pid)
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
		out = append(out, candidate{key: k, id: m.ID(), path: m.Path, start: m.Start, end: m.End})
	}
	return out, nil
}

// maxSymbolReadBytes bounds what is read of one candidate file for its dynamic symbols:
// without a .gnu.hash table debug/elf reads its symbol and string tables whole, and a sparse
// file may make them terabytes.
const maxSymbolReadBytes = 64 << 20

// lookupSymbol reads the descriptor's symbol from the ELF file c, as pid maps it
// (procfs.OpenMapped: the open does not block, and a file put at its path since is refused),
// reading at most maxSymbolReadBytes of it.
func lookupSymbol(pid uint32, c candidate) (symbolInfo, error) {
	file, err := procfs.OpenMapped(pid, c.start, c.end, c.path, c.id)
	if err != nil {
		return symbolInfo{}, fmt.Errorf("gdbjit: %w", err)
	}
	defer file.Close()
	f, err := elfsym.NewFile(file, maxSymbolReadBytes)
	if err != nil {
		return symbolInfo{}, fmt.Errorf("gdbjit: %s: %w", c.path, err)
	}
	var info symbolInfo
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			info.firstVaddr = p.Vaddr &^ 0xfff // the kernel maps whole pages
			break
		}
	}
	s, ok, err := elfsym.LookupDynamic(f, descriptorSymbol)
	if err != nil || !ok {
		return info, nil // no dynamic symbols (or a damaged table): not exported here
	}
	if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
		info.ok, info.value = true, s.Value
	}
	return info, nil
}
