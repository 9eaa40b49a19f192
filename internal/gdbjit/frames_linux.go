package gdbjit

import (
	"cmp"
	"debug/elf"
	"fmt"
	"io"
	"slices"

	"github.com/profd/profd/internal/procmem"
)

// Section is where a JIT loaded one section of a registered object in its process.
type Section struct {
	Addr, Size uint64
}

// FrameSections walks pid's list of registered debug objects and returns where each object's
// .eh_frame was loaded, ascending by address: the frame information of the object's code,
// as the JIT relocated it in the process's memory (the object's own copy of the section is
// not relocated: read the process's memory at Addr, not the object). Objects without one, and
// those that cannot be read, are left out. Only the objects' ELF and section headers and
// section names are read, each object once while it is listed. Errors are Debug's.
func (r *Reader) FrameSections(pid uint32) ([]Section, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, keys, err := r.listed(pid)
	if err != nil {
		return nil, err
	}
	defer st.walkDone()
	var now []objectKey
	for _, k := range keys {
		if _, cached := st.frames[k]; !cached && r.readable(k) {
			now = append(now, k)
		}
	}
	var fresh []Section
	if len(now) > 0 {
		if err := r.guarded(st, pid, func(read procmem.ReadFunc) {
			out := make([]Section, len(now))
			for i, k := range now {
				out[i] = frameSection(objectReader{read: read, addr: k.addr}, int64(k.size))
			}
			fresh = out
		}); err != nil {
			return nil, err
		}
	}
	live := make(map[objectKey]Section, len(keys))
	var out []Section
	next := 0 // now and fresh are in the list's order
	for _, k := range keys {
		s, cached := st.frames[k]
		if cached {
			r.stats.CachedReads++
		} else if next < len(now) && now[next] == k {
			s = fresh[next]
			next++
		}
		live[k] = s
		if s.Size > 0 {
			out = append(out, s)
		}
	}
	st.frames = live
	slices.SortFunc(out, func(a, b Section) int { return cmp.Compare(a.Addr, b.Addr) })
	return out, nil
}

// frameSection is the loaded .eh_frame section of the ELF object of size bytes ra reads; the
// zero Section when it has none, or its headers cannot be read. The bytes are untrusted: a
// panic of debug/elf is an object without one.
func frameSection(ra io.ReaderAt, size int64) (s Section) {
	defer func() {
		if recover() != nil {
			s = Section{}
		}
	}()
	f, err := elf.NewFile(io.NewSectionReader(ra, 0, size))
	if err != nil || f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Machine != elf.EM_X86_64 {
		return Section{}
	}
	for _, sec := range f.Sections {
		if sec.Name == ".eh_frame" && sec.Flags&elf.SHF_ALLOC != 0 && sec.Type != elf.SHT_NOBITS && sec.Addr != 0 && sec.Size > 0 {
			return Section{Addr: sec.Addr, Size: sec.Size}
		}
	}
	return Section{}
}

// objectReader reads a registered object from the process's memory, as an io.ReaderAt of
// offsets from the object's start.
type objectReader struct {
	read procmem.ReadFunc
	addr uint64
}

func (o objectReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("gdbjit: object at %#x: offset %d", o.addr, off)
	}
	b, err := o.read(o.addr+uint64(off), len(p))
	if err != nil {
		return 0, err
	}
	return copy(p, b), nil
}
