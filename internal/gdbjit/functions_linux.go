package gdbjit

import (
	"encoding/binary"
	"slices"
	"sort"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/procmem"
	"github.com/profd/profd/jitmap"
)

// Changes walks pid's list of registered objects and returns the functions of those
// registered since the last call for pid (the first call: of every object listed), and the
// addresses of the functions of those no longer listed. A function is a function symbol of
// its object at its load address (jitmap.ObjectFunctions), with the rows of the object's
// line table inside it (discriminators included) and the line its subprogram is declared
// on, when the object has DWARF. So the code of a JIT that writes neither a jitdump nor a
// perf map (LLVM's ORC in lli-14, a JIT built on ORC or MCJIT that keeps the GDB
// registration) can be named. Objects past the walk's MaxReadBytes are left to the next
// call (Stats.Deferred); objects that cannot be read or decoded count in Stats.BadObjects
// and are not read again while listed. Errors are Debug's.
func (r *Reader) Changes(pid uint32) (added []codeobj.Object, removed []uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, keys, err := r.listed(pid)
	if err != nil {
		return nil, nil, err
	}
	defer st.walkDone()
	fresh := r.newObjects(st, pid, keys, func(k objectKey) bool { _, ok := st.named[k]; return ok })
	live := make(map[objectKey][]uint64, len(keys))
	for _, k := range keys {
		if addrs, ok := st.named[k]; ok {
			live[k] = addrs
			continue
		}
		b, now, err := fresh.get(k)
		if err != nil {
			return nil, nil, err
		}
		if !now {
			continue // left to a later walk
		}
		funcs := r.objectFunctions(b)
		addrs := make([]uint64, len(funcs))
		for i, f := range funcs {
			addrs[i] = f.Addr
		}
		live[k] = addrs
		added = append(added, funcs...)
	}
	for k, addrs := range st.named {
		if _, ok := live[k]; !ok {
			removed = append(removed, addrs...)
		}
	}
	slices.Sort(removed)
	st.named = live
	return added, removed, nil
}

// objectFunctions returns the functions, with their lines, of the object of bytes b (nil: it
// could not be read); none when it cannot be decoded.
func (r *Reader) objectFunctions(b []byte) []codeobj.Object {
	if b == nil {
		r.stats.BadObjects++
		return nil
	}
	funcs, err := jitmap.ObjectFunctions(b, 0)
	if err != nil {
		r.stats.BadObjects++
		return nil
	}
	r.stats.Objects++
	info, err := jitmap.DebugObject(b, r.opts.MaxRows)
	if err != nil {
		return funcs // no DWARF (code built without -g): names without lines
	}
	for i := range funcs {
		f := &funcs[i]
		lo := sort.Search(len(info.Lines), func(j int) bool { return info.Lines[j].Addr >= f.Addr })
		hi := sort.Search(len(info.Lines), func(j int) bool { return info.Lines[j].Addr >= f.Addr+f.Size })
		if lo < hi {
			f.Lines = slices.Clone(info.Lines[lo:hi])
		}
		f.FirstLine = jitmap.FirstLineAt(info.Subprograms, f.Addr)
	}
	return funcs
}

// Registers reports whether pid's JIT has registered objects with the GDB JIT interface: it
// exports the descriptor and its list is not empty (a process that maps libLLVM and
// compiles nothing has an empty one).
func (r *Reader) Registers(pid uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := r.state(pid)
	if err != nil {
		return false
	}
	listed := false
	if _, err := r.guard(pid, func(read procmem.ReadFunc) {
		d, err := read(st.descAddr, descriptorSize)
		listed = err == nil && binary.LittleEndian.Uint64(d[16:]) != 0
	}); err != nil {
		return false
	}
	return listed
}
