package jitmap

import (
	"maps"
	"slices"
)

// inheritance is a process's link to the process it was forked from (Map.Inherit).
type inheritance struct {
	parent uint32
	// untilNs is when the process exec'd and its inherited code was gone; 0 while it runs
	// what it inherited.
	untilNs int64
}

// maxInheritance bounds the forks a lookup follows back (a fork of a fork of ...), so that
// links that close a circle, which pids reused can make, cost a few look-ups at most.
const maxInheritance = 8

// Inherit notes that process child runs in a copy of parent's address space: it was forked
// from parent and has not exec'd since (procfs.ForkCopy). The code parent's JIT described
// before the fork is child's too, at the same addresses; where that memory is shared (a
// JIT buffer mapped MAP_SHARED before the fork, as PHP's opcache maps it), so is the code
// either compiles into it later, which a JIT may describe in the parent's files alone (a
// perf map the parent opened, which every child writes to). From then on a look-up of
// child's that no code of its own answers is answered by parent's code at that address and
// time (and by parent's parent's, for parent's inherited code), until EndProgram ends
// child's program or RemovePid removes either process.
func (m *Map) Inherit(child, parent uint32) {
	if child == parent {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	links := maps.Clone(*m.inherits.Load())
	links[child] = inheritance{parent: parent}
	m.inherits.Store(&links)
}

// Inherits returns the process child inherited code from, if any (Inherit), and when it
// stopped running it (0: it still does).
func (m *Map) Inherits(child uint32) (parent uint32, untilNs int64, ok bool) {
	l, ok := (*m.inherits.Load())[child]
	return l.parent, l.untilNs, ok
}

// Heirs returns the processes whose look-ups reach pid's code through Inherit: its
// children, their children, and so on (maxInheritance deep), in no order.
func (m *Map) Heirs(pid uint32) []uint32 {
	links := *m.inherits.Load()
	if len(links) == 0 {
		return nil
	}
	var heirs []uint32
	next := []uint32{pid}
	for depth := 0; depth < maxInheritance && len(next) > 0; depth++ {
		cur := next
		next = nil
		for child, l := range links {
			if child != pid && !slices.Contains(heirs, child) && slices.Contains(cur, l.parent) {
				heirs = append(heirs, child)
				next = append(next, child)
			}
		}
	}
	return heirs
}

// inherited looks ip up at atNs in the code pid inherited, following its links back;
// Ref.Obj is nil when none answers.
func (m *Map) inherited(procs map[uint32]*procMap, pid uint32, ip uint64, atNs int64) Ref {
	links := *m.inherits.Load()
	if len(links) == 0 {
		return Ref{}
	}
	for range maxInheritance {
		l, ok := links[pid]
		if !ok || l.untilNs != 0 && atNs >= l.untilNs {
			return Ref{}
		}
		pid = l.parent
		if p := procs[pid]; p != nil {
			if r := p.find(ip, atNs); r.Obj != nil {
				return r
			}
		}
	}
	return Ref{}
}

// holdsInherited is Holds for the code pid inherited.
func (m *Map) holdsInherited(procs map[uint32]*procMap, pid uint32, addr, version uint64) bool {
	links := *m.inherits.Load()
	for range min(len(links), maxInheritance) {
		l, ok := links[pid]
		if !ok {
			return false
		}
		pid = l.parent
		if p := procs[pid]; p != nil && p.holds(addr, version) {
			return true
		}
	}
	return false
}

// endInheritance ends what pid inherited at atNs: it exec'd. Callers hold m.mu.
func (m *Map) endInheritance(pid uint32, atNs int64) {
	links := *m.inherits.Load()
	if l, ok := links[pid]; ok && l.untilNs == 0 {
		next := maps.Clone(links)
		next[pid] = inheritance{parent: l.parent, untilNs: atNs}
		m.inherits.Store(&next)
	}
}

// forgetInheritance drops pid's links: to the process it inherited from, and those of the
// processes that inherited from it (whose look-ups would otherwise reach whatever process
// is given pid next). Callers hold m.mu.
func (m *Map) forgetInheritance(pid uint32) {
	links := *m.inherits.Load()
	var next map[uint32]inheritance
	for child, l := range links {
		if child == pid || l.parent == pid {
			if next == nil {
				next = maps.Clone(links)
			}
			delete(next, child)
		}
	}
	if next != nil {
		m.inherits.Store(&next)
	}
}
