package oracle

// Version is the version of the oracle's JSON document.
const Version = 1

// Result is the exact profile of one recorded run: per JIT function, how many times each
// instruction ran and how many times each control transfer between two instructions was
// taken. Addresses are absolute, in the recorded process.
type Result struct {
	Version   int    `json:"version"`
	Workload  string `json:"workload,omitempty"`
	Command   string `json:"command,omitempty"`
	Pid       int    `json:"pid"`
	Event     string `json:"event"` // the callgrind event counted: "Ir", instructions executed
	Callgrind string `json:"creator,omitempty"`

	// JITInstructions is how many instructions ran inside the functions below;
	// Unattributed how many ran in JIT-object memory ("???") outside every code object
	// (lli's stubs, the GOT-like trampolines).
	JITInstructions uint64 `json:"jit_instructions"`
	Unattributed    uint64 `json:"unattributed_instructions"`

	Functions []Function `json:"functions"`
}

// Function is one JIT code object with its exact counts. Name, Addr, Code and Counts are
// spelled as in reestimate's JSON interchange (docs/reestimate-json.md), where Counts take
// the place of samples.
type Function struct {
	Name string `json:"name"`
	Addr Addr   `json:"addr"`
	Size uint64 `json:"size"`
	Code Hex    `json:"code"`

	// Entries is how often control entered at the first instruction from outside the
	// function (calls, and jumps from other code).
	Entries uint64 `json:"entries"`
	// Instructions is Σ Counts.
	Instructions uint64 `json:"instructions"`
	// Counts: executions per instruction address; instructions that never ran are absent.
	Counts map[Addr]uint64 `json:"counts"`

	// Jumps are callgrind's taken jumps leaving this function's instructions (To may lie
	// outside the function: a tail call). Conditional jumps carry how often they executed.
	Jumps []Jump `json:"jumps"`
	// Fallthroughs are the not-taken sides: from an instruction to the one after it.
	Fallthroughs []Edge `json:"fallthroughs"`
	// Calls are calls made from this function's instructions.
	Calls []CallSite `json:"calls,omitempty"`

	// Unaligned counts executions callgrind reported at addresses that are not instruction
	// boundaries of the decoded code; Undecodable counts bytes x86asm could not decode.
	// Both are zero when the jitdump and the callgrind run match.
	Unaligned   uint64 `json:"unaligned,omitempty"`
	Undecodable int    `json:"undecodable_bytes,omitempty"`
	// Imbalances lists instructions whose count differs from the flow that reaches them
	// (fall-through + jumps + entries). Empty for an exact profile of a normal run.
	Imbalances []Imbalance `json:"imbalances,omitempty"`
}

// Jump is a taken jump from one instruction to another.
type Jump struct {
	From        Addr   `json:"from"`
	To          Addr   `json:"to"`
	Count       uint64 `json:"count"`
	Conditional bool   `json:"conditional,omitempty"`
	Executed    uint64 `json:"executed,omitempty"` // conditional only: how often it was evaluated
}

// Edge is a fall-through from one instruction to the next.
type Edge struct {
	From  Addr   `json:"from"`
	To    Addr   `json:"to"`
	Count uint64 `json:"count"`
}

// CallSite is a call instruction and its callee.
type CallSite struct {
	From   Addr   `json:"from"`
	To     Addr   `json:"to"`
	Callee string `json:"callee,omitempty"` // the callee's code object name, when it is JIT code
	Count  uint64 `json:"count"`
}

// Imbalance is an instruction whose count is not the flow into it.
type Imbalance struct {
	Addr   Addr   `json:"addr"`
	Count  uint64 `json:"count"`
	Inflow uint64 `json:"inflow"`
}

// Function returns the function called name, if the result holds one.
func (r *Result) Function(name string) (*Function, bool) {
	for i := range r.Functions {
		if r.Functions[i].Name == name {
			return &r.Functions[i], true
		}
	}
	return nil, false
}
