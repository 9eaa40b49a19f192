package attribute

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/profileio"
)

// Snapshot is one process's capture as Counts.Snapshot took it, with what naming its native
// and kernel frames needs: the symbols of the files its native samples fell in, read in the
// background. Name names them.
type Snapshot struct {
	Capture *profileio.Capture
	pid     uint32
	log     *slog.Logger
	look    Lookup
	native  []*elfsym.File // the symbols of each of Capture.Native's files; nil where none
	// stackNative are the native frames of Capture.Stacks, in stackMappings (the target's
	// native mappings when it was taken), named with native's samples.
	stackNative   []stackRef
	stackMappings []nativeMapping
}

// Snapshot takes process pid's capture: every code object the map knows for it plus sampled
// objects the map has since reclaimed, their samples, the samples in native code by address
// (unnamed yet: Snapshot.Name names them), the other samples outside JIT code by mapping,
// the samples in JIT memory no object named, and the samples by call chain (whose frames may
// add objects). Objects with samples or in a call chain carry their code bytes and line
// table; the others only their name, range and times, which name the targets of calls, so
// that a capture's size and a flush's time follow the code that was sampled, not all code
// loaded. It returns nil for a process not added.
func (a *Counts) Snapshot(pid uint32, meta profileio.CaptureMeta, end profileio.CaptureEnd) *Snapshot {
	p := a.procs[pid]
	if p == nil {
		return nil
	}
	c := &profileio.Capture{
		Version: profileio.CaptureVersion,
		Meta:    meta,
		Processes: []profileio.Process{{Pid: p.pid, Command: p.image, Executable: p.executable,
			CommandLine: p.info.CommandLine, CgroupPath: p.info.CgroupPath, ContainerID: p.info.ContainerID,
			ServiceName: p.info.ServiceName}},
		End: &end,
	}
	sampled := make(map[uint64]*profileio.CaptureObject) // by version
	p.named.each(func(o *codeobj.Object, samples []profileio.OffsetCount) {
		sampled[o.Version] = &profileio.CaptureObject{Pid: p.pid, Object: *o, Samples: samples}
	})
	for _, o := range a.jit.Objects(p.pid) {
		co := sampled[o.Version]
		if co == nil {
			co = &profileio.CaptureObject{Pid: p.pid}
		} else {
			delete(sampled, o.Version)
		}
		co.Object = *o // as the map has it now: a later record may have added code or lines
		co.ID = profileio.ObjectID(len(c.Objects))
		c.Objects = append(c.Objects, co)
	}
	// Sampled objects the map has since reclaimed.
	for _, v := range slices.Sorted(maps.Keys(sampled)) {
		co := sampled[v]
		co.ID = profileio.ObjectID(len(c.Objects))
		c.Objects = append(c.Objects, co)
	}
	for _, name := range slices.Sorted(maps.Keys(p.outside)) {
		c.Unmapped = append(c.Unmapped, profileio.UnmappedCount{Pid: p.pid, Mapping: name, Count: p.outside[name]})
	}
	c.Unnamed = p.unnamed.list(p.pid)
	slices.SortFunc(c.Unnamed, func(a, b profileio.UnnamedCount) int {
		return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.FirstNs, b.FirstNs))
	})
	s := &Snapshot{Capture: c, pid: p.pid, log: a.log, look: a.look}
	p.stacks.resolve(a.jit, p.pid)
	s.stackNative = p.stacks.capture(c, p.pid, p.native.mappings)
	s.stackMappings = p.native.mappings // appended to only: what it holds now stays
	c.Native, s.native = p.native.capture(p.pid, s.stackNative)
	dropUnsampledCode(c)
	return s
}

// dropUnsampledCode leaves out the code bytes and line tables of c's objects that have no
// samples and are in no call chain: no output reads them (profgen and pprof read the code and
// lines of sampled objects and of call chains' frames only; call targets are named by name
// and range). The objects themselves are the map's: only c's copies change.
func dropUnsampledCode(c *profileio.Capture) {
	framed := make([]bool, len(c.Objects))
	for i := range c.Stacks {
		for _, f := range c.Stacks[i].Frames {
			if f.Object != profileio.NoObject && int(f.Object) < len(framed) {
				framed[f.Object] = true
			}
		}
	}
	for i, o := range c.Objects {
		if len(o.Samples) == 0 && !framed[i] {
			o.Object.Code, o.Object.Lines = nil, nil
		}
	}
}

// Name names the snapshot's native samples and native stack frames from their files'
// symbols, waiting for files still being read until ctx is done, and its kernel frames
// through the lookup; then it marks the call chains cut short of where their thread
// started (markCut) and returns the samples with complete chains and with cut ones. It
// reads files' symbols: call it outside the lock that serialises Counts.
func (s *Snapshot) Name(ctx context.Context) (complete, cut uint64) {
	demangled := map[string]string{}
	name := func(tab *elfsym.Table, fileOffset uint64) string {
		name, ok := tab.Lookup(fileOffset)
		if !ok {
			return ""
		}
		dn, seen := demangled[name]
		if !seen {
			dn = elfsym.Demangle(name)
			demangled[name] = dn
		}
		return dn
	}
	// addressed gives m the calls inlined at addr and the source positions there, which tab
	// (its file's) holds, once for each address (a return address is on many chains).
	var source []elfsym.SourceLine
	type addrKey struct {
		m    *profileio.NativeMapping
		addr uint64
	}
	done := map[addrKey]bool{}
	addressed := func(m *profileio.NativeMapping, tab *elfsym.Table, addr uint64) {
		k := addrKey{m, addr}
		if done[k] {
			return
		}
		done[k] = true
		off := addr - m.Start + m.Offset
		if calls := tab.Inlined(off); len(calls) > 0 {
			if m.Inlined == nil {
				m.Inlined = map[uint64][]string{}
			}
			m.Inlined[addr] = calls
		}
		if source = tab.Source(off, source[:0]); len(source) > 0 {
			lines := make([]profileio.SourceLine, len(source))
			for i, l := range source {
				lines[i] = profileio.SourceLine(l)
			}
			if m.Lines == nil {
				m.Lines = map[uint64][]profileio.SourceLine{}
			}
			m.Lines[addr] = lines
		}
	}
	tabs := map[*elfsym.File]*elfsym.Table{}
	table := func(f *elfsym.File, file string) *elfsym.Table {
		if f == nil {
			return nil
		}
		if tab, ok := tabs[f]; ok {
			return tab
		}
		tab, err := f.Wait(ctx)
		if err != nil {
			s.log.Debug("profd: native code's symbols not read", "pid", s.pid, "file", file, "err", err)
		}
		tabs[f] = tab
		return tab
	}
	for i, m := range s.Capture.Native {
		if i >= len(s.native) || s.native[i] == nil {
			continue
		}
		tab := table(s.native[i], m.File)
		if tab == nil {
			continue
		}
		m.BuildID = tab.BuildID
		for j := range m.Samples {
			smp := &m.Samples[j]
			smp.Function = name(tab, smp.Address-m.Start+m.Offset)
			addressed(m, tab, smp.Address)
		}
	}
	for _, r := range s.stackNative {
		m := &s.stackMappings[r.native]
		tab := table(m.syms, m.m.Path)
		if tab == nil {
			continue
		}
		r.frame.Function = name(tab, r.frame.Address-m.m.Start+m.m.Offset)
		if nm := s.Capture.NativeAt(s.pid, m.m.Path, r.frame.Address); nm != nil {
			addressed(nm, tab, r.frame.Address)
		}
	}
	s.nameKernel()
	if len(s.Capture.Stacks) == 0 {
		return 0, 0
	}
	return markCut(s.Capture)
}

// nameKernel names the kernel frames of the stacks through the lookup.
func (s *Snapshot) nameKernel() {
	stacks := s.Capture.Stacks
	for i := range stacks {
		for j := range stacks[i].Frames {
			if f := &stacks[i].Frames[j]; f.Mapping == profileio.KernelMapping && f.Function == "" {
				f.Function, _ = s.look.KernelSymbol(f.Address)
			}
		}
	}
}
