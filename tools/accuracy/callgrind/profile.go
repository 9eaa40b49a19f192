package callgrind

import "slices"

// Profile is one callgrind part, its contexts folded together.
type Profile struct {
	Version   int
	Creator   string
	Pid       int
	Cmd       string
	Part      int
	Positions []string // subposition names, e.g. ["instr", "line"]
	Events    []string // event names, e.g. ["Ir"]
	Summary   []uint64 // the "summary:" header, one per event (nil when absent)
	Totals    []uint64 // the "totals:" trailer, one per event (nil when absent)

	Instrs []Instr // self cost per (Object, Addr), ascending
	Jumps  []Jump  // taken jumps per (Object, From, To), ascending
	Calls  []Call  // calls per (Object, From, CalleeObject, To), ascending
}

// Instr is the self cost of one instruction (or, without an "instr" subposition, of one
// source line at address 0), summed over every context callgrind kept it in.
type Instr struct {
	Object   string
	Addr     uint64
	Function string // the first function name it was seen under
	File     string // source file ("???" when unknown)
	Line     uint32
	Self     []uint64 // one per event
}

// Jump is a taken jump between two instructions of one object. For a conditional jump
// (jcnd=) Executed is how often the jump instruction ran and Taken how often it jumped;
// for jump= Executed equals Taken.
type Jump struct {
	Object      string
	From, To    uint64
	Conditional bool
	Taken       uint64
	Executed    uint64
}

// Call is a call from one instruction: how often it called To, and the callee's inclusive
// cost over those calls.
type Call struct {
	Object       string
	From         uint64
	CalleeObject string
	Callee       string // function name of the target
	To           uint64
	Count        uint64
	Inclusive    []uint64
}

// EventIndex is the position of event name in Events and in every cost vector, or -1.
func (p *Profile) EventIndex(name string) int {
	return slices.Index(p.Events, name)
}

// Instr returns the self cost of the instruction at addr in object, if callgrind saw it run.
func (p *Profile) Instr(object string, addr uint64) (*Instr, bool) {
	i, ok := slices.BinarySearchFunc(p.Instrs, instrKey{object, addr}, func(in Instr, k instrKey) int {
		return compareKey(instrKey{in.Object, in.Addr}, k)
	})
	if !ok {
		return nil, false
	}
	return &p.Instrs[i], true
}
