package cfg

import (
	"sort"
	"sync"
)

// MaxCodeBytes and MaxCodeBlocks bound the functions Build accepts, and so what one
// function's analyses and repair cost: some 80 MB and a tenth of a second at the most blocks,
// whatever code a JIT hands over. Larger code gets ErrCodeTooLarge, and code that makes more
// blocks ErrTooManyBlocks, before anything of its size is allocated beyond the decoded
// instructions (16 bytes each) and a word per code byte. Compiled functions are far below
// both: the largest of LLVM's own are some 60 KiB.
const (
	MaxCodeBytes  = 1 << 20
	MaxCodeBlocks = 1 << 16
)

// Build recovers the control-flow graph of one x86-64 function from its machine code, loaded
// at addr.
//
// Leaders are the entry, every in-function branch target and every instruction after a branch
// or return. Calls do not end blocks. A return, a jump out of [addr, addr+len(code)) (a tail
// call), an indirect jump (counted in Graph.IndirectJumps) and a trap (ud2, hlt, int3) end a path
// and mark their block Exit, as does code that runs off the end. A jump to the entry is an
// ordinary edge. Nops and int3 that nothing reaches (alignment padding between and after blocks)
// are not made into blocks.
//
// Instructions are found by following control flow from the entry (decodeAll): bytes that
// no flow from the entry reaches and that do not decode as code (data a JIT put between
// blocks) make no block, and a sample there counts as padding.
//
// Errors are *CodeError values naming the offset, of code the entry reaches: undecodable
// bytes (ErrUndecodable), an instruction cut off by the end of the code (ErrTruncated) and
// control reaching the middle of an instruction (ErrJumpIntoInstruction).
//
// Build is safe to call concurrently; it does not keep code.
func Build(code []byte, addr uint64) (*Graph, error) {
	if len(code) == 0 {
		return nil, &CodeError{Addr: addr, Err: ErrEmptyCode}
	}
	if len(code) > MaxCodeBytes {
		return nil, &CodeError{Addr: addr, Offset: MaxCodeBytes, Err: ErrCodeTooLarge}
	}
	sc := scratchPool.Get().(*scratch)
	defer func() {
		if cap(sc.insts) <= maxPooledInsts { // a huge function's scratch is left to the GC
			scratchPool.Put(sc)
		}
	}()
	insts, err := decodeAll(sc, code, addr)
	if err != nil {
		return nil, err
	}
	leader := markLeaders(sc.leader, insts, len(code))
	sc.leader = leader
	dropPadding(insts, leader)
	kept, blocks, past := countBlocks(insts, leader)
	if blocks > MaxCodeBlocks {
		return nil, &CodeError{Addr: addr, Offset: past, Err: ErrTooManyBlocks}
	}
	g := &Graph{Start: addr, End: addr + uint64(len(code))}
	formBlocks(g, insts, leader, addr, kept, blocks)
	linkBlocks(g, insts, len(code))
	return g, nil
}

// scratch is Build's working memory, reused through scratchPool; nothing in it outlives
// a call.
type scratch struct {
	insts   []inst  // decodeAll's result, in address order
	found   []inst  // the instructions flow reaches, in the order decodeAll meets them
	at      []int32 // per code byte: 0 no instruction's, k > 0 the first of found[k-1], -1 another
	pending []branch
	leader  []uint8
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

const maxPooledInsts = 1 << 16

// branch is a place control reaches, and the instruction it comes from (-1: the entry).
type branch struct{ from, to int }

// decodeAll decodes the instructions of code, in address order, into sc.insts. It follows
// control flow from the entry, each path through its fall-throughs before the targets of
// the direct branches it met: a JIT may put data between blocks (HotSpot's compiled methods
// do, after an unconditional jump), which decoding the bytes in order would read as
// instructions and lose its way into the code after. The runs of bytes no flow reaches
// (jump tables' targets, padding, data) are then decoded in order, each up to its first
// bytes that are no instruction within it (undecodable, or running into the code reached);
// those and the rest of the run are data. Its errors are those of the code reached.
func decodeAll(sc *scratch, code []byte, addr uint64) ([]inst, error) {
	if cap(sc.at) < len(code) {
		sc.at = make([]int32, len(code))
	}
	at := sc.at[:len(code)]
	clear(at)
	found, err := followFlow(sc, code, addr, at)
	if err != nil {
		return nil, err
	}
	// Compiled x86-64 code averages three to four bytes an instruction.
	insts := sc.insts[:0]
	if want := len(code)/3 + 1; cap(insts) < want {
		insts = make([]inst, 0, want)
	}
	for off := 0; off < len(code); {
		if k := at[off]; k > 0 {
			insts = append(insts, found[k-1])
			off += int(found[k-1].size)
			continue
		}
		end := off
		for end < len(code) && at[end] == 0 {
			end++
		}
		for off < end {
			var in inst
			if decodeInst(code, off, &in) != nil || off+int(in.size) > end {
				off = end // data, to the end of the run
				break
			}
			insts = append(insts, in)
			off += int(in.size)
		}
	}
	sc.insts = insts
	return insts, nil
}

// followFlow decodes the instructions control reaches from the entry into sc.found, and
// marks their bytes in at (decodeAll).
func followFlow(sc *scratch, code []byte, addr uint64, at []int32) ([]inst, error) {
	into := func(from, to int) error {
		return &CodeError{Addr: addr, Offset: max(from, 0), Target: addr + uint64(to), Err: ErrJumpIntoInstruction}
	}
	found := sc.found[:0]
	pending := append(sc.pending[:0], branch{from: -1, to: 0})
	defer func() { sc.found, sc.pending = found, pending }()
	for len(pending) > 0 {
		b := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		for from, off := b.from, b.to; off < len(code); {
			if k := at[off]; k > 0 {
				break // joins code already decoded
			} else if k < 0 {
				return nil, into(from, off)
			}
			var in inst
			if err := decodeInst(code, off, &in); err != nil {
				return nil, &CodeError{Addr: addr, Offset: off, Err: err}
			}
			end := off + int(in.size)
			for j := off + 1; j < end; j++ {
				if at[j] != 0 { // a path reached here runs on into this one's middle
					return nil, into(off, j)
				}
			}
			found = append(found, in)
			at[off] = int32(len(found))
			for j := off + 1; j < end; j++ {
				at[j] = -1
			}
			if (in.kind == kindCond || in.kind == kindJump) && in.target >= 0 && in.target < int64(len(code)) {
				pending = append(pending, branch{from: off, to: int(in.target)})
			}
			if in.kind.ends() {
				break
			}
			from, off = off, end
		}
	}
	return found, nil
}

// Leader marks, per instruction.
const (
	leaderNone   uint8 = iota
	leaderFlow         // starts a block because the previous instruction branched or stopped
	leaderTarget       // a branch target (or the entry): reached, never padding
	dropped            // padding that nothing reaches: no block
)

// markLeaders finds block starts: the entry, every branch target, every instruction after
// a branch, return or trap, and every one after bytes that are no instruction. A branch to
// the middle of an instruction gets no leader: only the bytes no flow reaches decode so
// (data read as code, decodeAll), and linkBlocks makes such a branch leave the function.
func markLeaders(leader []uint8, insts []inst, size int) []uint8 {
	if cap(leader) < len(insts) {
		leader = make([]uint8, len(insts))
	}
	leader = leader[:len(insts)]
	clear(leader)
	leader[0] = leaderTarget
	for i, in := range insts {
		if i+1 < len(insts) && leader[i+1] == leaderNone && insts[i+1].off != in.off+uint32(in.size) {
			leader[i+1] = leaderFlow // after data
		}
		if in.kind == kindPlain || in.kind == kindPad {
			continue
		}
		if i+1 < len(insts) && leader[i+1] == leaderNone {
			leader[i+1] = leaderFlow
		}
		if in.kind != kindCond && in.kind != kindJump {
			continue
		}
		if in.target < 0 || in.target >= int64(size) {
			continue // leaves the function: a tail call
		}
		if j, ok := instAt(insts, uint32(in.target)); ok {
			leader[j] = leaderTarget
		}
	}
	return leader
}

// instAt finds the instruction that starts at byte offset off.
func instAt(insts []inst, off uint32) (int, bool) {
	j := sort.Search(len(insts), func(k int) bool { return insts[k].off >= off })
	return j, j < len(insts) && insts[j].off == off
}

// dropPadding marks the nops and int3 after a jump, return or trap that no branch reaches.
func dropPadding(insts []inst, leader []uint8) {
	for i := 1; i < len(insts); i++ {
		if leader[i] == leaderTarget || !insts[i].pad {
			continue
		}
		if prev := i - 1; leader[prev] == dropped || insts[prev].kind.ends() {
			leader[i] = dropped
		}
	}
	// The first instruction after a dropped run starts a block.
	for i := 1; i < len(insts); i++ {
		if leader[i] == leaderNone && leader[i-1] == dropped {
			leader[i] = leaderFlow
		}
	}
}

// countBlocks returns how many instructions are kept and how many blocks they make, and the
// offset of the first instruction of the block past MaxCodeBlocks (0 when there is none).
func countBlocks(insts []inst, leader []uint8) (kept, blocks, past int) {
	for i := range insts {
		if leader[i] == dropped {
			continue
		}
		kept++
		if leader[i] != leaderNone {
			blocks++
			if blocks == MaxCodeBlocks+1 {
				past = int(insts[i].off)
			}
		}
	}
	return kept, blocks, past
}

// formBlocks cuts the kept instructions (kept of them, making nblocks blocks) into blocks
// at leaders.
func formBlocks(g *Graph, insts []inst, leader []uint8, addr uint64, kept, nblocks int) {
	addrs := make([]uint64, kept) // one backing array for every block's Insts
	g.Blocks = make([]Block, 0, nblocks)
	k := 0
	for i := 0; i < len(insts); {
		if leader[i] == dropped {
			i++
			continue
		}
		first, j := k, i
		for {
			addrs[k] = addr + uint64(insts[j].off)
			switch insts[j].call {
			case callDirect:
				g.Calls = append(g.Calls, Call{Block: len(g.Blocks), Addr: addrs[k], Target: addr + uint64(insts[j].target)})
			case callIndirect:
				g.Calls = append(g.Calls, Call{Block: len(g.Blocks), Addr: addrs[k]})
			}
			k++
			j++
			if j == len(insts) || leader[j] != leaderNone {
				break
			}
		}
		last := &insts[j-1]
		g.Blocks = append(g.Blocks, Block{
			Start: addrs[first],
			End:   addr + uint64(last.off) + uint64(last.size),
			Insts: addrs[first:k:k], // capped: appending to one block's Insts must not overwrite the next's
		})
		i = j
	}
}

// linkBlocks adds the edges and marks exits. The last instruction of each block decides.
func linkBlocks(g *Graph, insts []inst, size int) {
	// Most blocks have one or two successors.
	g.Edges = make([]Edge, 0, len(g.Blocks)*3/2)
	blockAt := func(off int64) (int, bool) {
		a := g.Start + uint64(off)
		j := sort.Search(len(g.Blocks), func(k int) bool { return g.Blocks[k].Start >= a })
		return j, j < len(g.Blocks) && g.Blocks[j].Start == a
	}
	next := func(i int) (int, bool) {
		if i+1 < len(g.Blocks) && g.Blocks[i+1].Start == g.Blocks[i].End {
			return i + 1, true
		}
		return 0, false
	}
	ii := 0 // index into insts of the current block's last instruction
	for i := range g.Blocks {
		b := &g.Blocks[i]
		last := uint32(b.Insts[len(b.Insts)-1] - g.Start)
		for insts[ii].off != last {
			ii++
		}
		in := insts[ii]
		switch in.kind {
		case kindCond, kindJump:
			if to, ok := blockAt(in.target); ok && in.target >= 0 && in.target < int64(size) {
				kind := Jump
				if in.kind == kindCond {
					kind = CondTaken
				}
				g.Edges = append(g.Edges, Edge{From: i, To: to, Kind: kind})
			} else {
				b.Exit = true // tail call, or a conditional one
			}
			if in.kind == kindCond {
				if to, ok := next(i); ok {
					g.Edges = append(g.Edges, Edge{From: i, To: to, Kind: CondNotTaken})
				} else {
					b.Exit = true
				}
			}
		case kindIndirect:
			g.IndirectJumps++
			b.Exit = true
			b.IndirectJump = true
		case kindReturn, kindTrap:
			b.Exit = true
		default:
			if to, ok := next(i); ok {
				g.Edges = append(g.Edges, Edge{From: i, To: to, Kind: FallThrough})
			} else {
				b.Exit = true // runs off the end of the code
			}
		}
	}
}
