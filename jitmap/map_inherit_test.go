package jitmap

import (
	"slices"
	"testing"
)

// TestMapInherit: a child forked from a JIT process runs the parent's code at the same
// addresses, its own first; the code the parent describes after the fork too (memory they
// share); not after the child's exec, nor once either is removed.
func TestMapInherit(t *testing.T) {
	const parent, child, grandchild, other = 10, 11, 12, 13
	m := NewMap(MapOptions{})
	mustApply(t, m,
		load(parent, "before_fork", 0x1000, 0x100, 10),
		load(other, "stranger", 0x3000, 0x100, 10))
	wantName(t, m, child, 0x1010, 20, "")
	m.Inherit(child, parent)
	m.Inherit(grandchild, child)
	m.Inherit(parent, parent) // no link to itself
	mustApply(t, m,
		load(child, "own", 0x1000, 0x80, 30),
		load(parent, "after_fork", 0x2000, 0x100, 50))
	wantName(t, m, child, 0x1010, 20, "before_fork")
	wantName(t, m, child, 0x1010, 40, "own") // its own code first
	wantName(t, m, child, 0x1090, 40, "before_fork")
	wantName(t, m, child, 0x2010, 60, "after_fork")
	wantName(t, m, child, 0x2010, 40, "") // not there yet
	wantName(t, m, grandchild, 0x2010, 60, "after_fork")
	wantName(t, m, grandchild, 0x1010, 40, "own")
	wantName(t, m, parent, 0x1010, 40, "before_fork") // nothing flows up
	wantName(t, m, child, 0x3010, 40, "")
	if heirs := m.Heirs(parent); !slices.Equal(slices.Sorted(slices.Values(heirs)), []uint32{child, grandchild}) {
		t.Errorf("Heirs(parent) = %v, want [%d %d]", heirs, child, grandchild)
	}
	if heirs := m.Heirs(other); len(heirs) != 0 {
		t.Errorf("Heirs(other) = %v", heirs)
	}
	v := m.Find(parent, 0x2010, 60).Version
	if !m.Holds(child, 0x2000, v) || !m.Holds(grandchild, 0x2000, v) || m.Holds(other, 0x2000, v) {
		t.Errorf("Holds of the inherited version: child %v, grandchild %v, other %v",
			m.Holds(child, 0x2000, v), m.Holds(grandchild, 0x2000, v), m.Holds(other, 0x2000, v))
	}

	// The child execs at 100: its own code ends there, and so does what it inherited, for it
	// and for the grandchild that reaches the parent through it.
	m.EndProgram(child, 100)
	wantName(t, m, child, 0x2010, 90, "after_fork")
	wantName(t, m, child, 0x2010, 110, "")
	wantName(t, m, grandchild, 0x2010, 110, "")
	if p, until, ok := m.Inherits(child); !ok || p != parent || until != 100 {
		t.Errorf("Inherits(child) = %d, %d, %v; want %d, 100, true", p, until, ok, parent)
	}

	// The parent is removed: its pid, given to a process with code at the same address,
	// names nothing of the child's.
	m.RemovePid(parent)
	mustApply(t, m, load(parent, "pid_reused", 0x2000, 0x100, 200))
	wantName(t, m, child, 0x2010, 90, "")
	if _, _, ok := m.Inherits(child); ok {
		t.Error("the child still inherits from a removed process")
	}
	if _, _, ok := m.Inherits(grandchild); !ok {
		t.Error("the grandchild's link to the child went with the parent")
	}
	m.RemovePid(grandchild)
	if _, _, ok := m.Inherits(grandchild); ok {
		t.Error("a removed process still inherits")
	}
}

// TestMapInheritCircle: links that close a circle (pids reused) end a look-up.
func TestMapInheritCircle(t *testing.T) {
	m := NewMap(MapOptions{})
	mustApply(t, m, load(3, "three", 0x1000, 0x100, 10))
	m.Inherit(1, 2)
	m.Inherit(2, 1)
	m.Inherit(3, 1)
	wantName(t, m, 1, 0x1010, 20, "")
	wantName(t, m, 1, 0x5010, 20, "")
	if m.Holds(1, 0x1000, 1) {
		t.Error("Holds followed the circle to another process")
	}
	if heirs := m.Heirs(1); !slices.Equal(slices.Sorted(slices.Values(heirs)), []uint32{2, 3}) {
		t.Errorf("Heirs(1) = %v, want [2 3]", heirs)
	}
}
