package cfg

// EdgeKind says how control passes along an edge.
type EdgeKind uint8

const (
	FallThrough  EdgeKind = iota // into the next block in address order, no branch taken
	Jump                         // unconditional direct jump
	CondTaken                    // conditional branch, taken
	CondNotTaken                 // conditional branch, not taken (falls through)
	Indirect                     // an indirect jump to a target the code does not name (see LinkIndirectJumps)
)

func (k EdgeKind) String() string {
	switch k {
	case FallThrough:
		return "fallthrough"
	case Jump:
		return "jump"
	case CondTaken:
		return "taken"
	case CondNotTaken:
		return "not-taken"
	case Indirect:
		return "indirect"
	}
	return "unknown"
}

// Block is a basic block: a run of instructions entered only at the first and left only
// after the last.
type Block struct {
	Start, End uint64   // byte range [Start, End) in the function's address space
	Insts      []uint64 // address of each instruction, ascending; len(Insts) ≥ 1
	// Exit is true when control can leave the function from this block: ret, a jump out of
	// the function (tail call), an indirect jump, or code that runs off the end.
	Exit bool
	// IndirectJump is true when the block ends in an indirect jump (a jump table, a computed
	// goto): its targets are not in the code, so it is an Exit unless LinkIndirectJumps
	// gives it edges.
	IndirectJump bool
}

// Edge is a control transfer between two blocks of one function.
type Edge struct {
	From, To int // indices into Graph.Blocks
	Kind     EdgeKind
}

// Graph is one function's control-flow graph (CFG). Blocks are in address order when recovered from
// machine code; Blocks[Entry] is where the function is entered.
type Graph struct {
	// Start and End are the function's code range [Start, End) when the CFG was recovered from
	// machine code (Build); blocks cover it except for padding nothing reaches. Both are zero
	// when unknown.
	Start, End uint64
	Entry      int
	Blocks     []Block
	Edges      []Edge
	// IndirectJumps counts indirect jumps (jump tables, computed gotos) whose targets are
	// unknown; each ends its path like an exit.
	IndirectJumps int
	// Calls are the call instructions, in address order (Build fills them in).
	Calls []Call
}

// Call is a call instruction: it runs as often as its block.
type Call struct {
	Block  int    // index into Graph.Blocks
	Addr   uint64 // the call instruction's address
	Target uint64 // the callee's address for a direct call; 0 for an indirect one
}
