package compare

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// IRFunction is one function of LLVM IR text: its basic blocks in order, each with the
// source locations of its instructions (the innermost DILocation's line and discriminator:
// the line table of the machine code names the same ones).
type IRFunction struct {
	Name   string
	Blocks []IRBlock
}

// IRBlock is a basic block of an IRFunction.
type IRBlock struct {
	Label string // "" for an unlabelled entry block
	Locs  map[Loc]bool
}

// Loc is a source location as line tables give it: a line and a DWARF discriminator (0 for
// none), raw, as LLVM encodes it (base discriminator and duplication factor together).
type Loc struct {
	Line, Discriminator uint32
}

// maxIRLineBytes caps one line of IR text.
const maxIRLineBytes = 1 << 20

var (
	defineRE   = regexp.MustCompile(`^define [^@]*@("[^"]*"|[-\w.$]+)\(`)
	labelRE    = regexp.MustCompile(`^("[^"]*"|[-\w.$]+):`)
	dbgRefRE   = regexp.MustCompile(`!dbg !(\d+)`)
	locationRE = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DILocation\(line: (\d+)(?:, column: \d+)?, scope: !(\d+)`)
	// Discriminators live in the scope: LLVM gives a location a discriminator by moving it
	// into a DILexicalBlockFile that carries one.
	blockFileRE = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DILexicalBlockFile\(.*\bdiscriminator: (\d+)`)
)

// ParseIR reads LLVM IR text (clang -S -emit-llvm, opt -S) into its defined functions,
// keyed by name. Errors name the line.
func ParseIR(r io.Reader) (map[string]*IRFunction, error) {
	funcs := map[string]*IRFunction{}
	type pending struct {
		block *IRBlock
		ref   uint64
	}
	var refs []pending // instruction → its !dbg metadata, resolved at the end
	type location struct{ line, scope uint64 }
	locs := map[uint64]location{}
	discs := map[uint64]uint32{} // DILexicalBlockFile → its discriminator
	var cur *IRFunction
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxIRLineBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "define "):
			m := defineRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("compare: ir line %d: unreadable define", n)
			}
			cur = &IRFunction{Name: strings.Trim(m[1], `"`)}
			funcs[cur.Name] = cur
		case cur != nil && line == "}":
			cur = nil
		case cur != nil:
			if m := labelRE.FindStringSubmatch(line); m != nil {
				cur.Blocks = append(cur.Blocks, IRBlock{Label: strings.Trim(m[1], `"`), Locs: map[Loc]bool{}})
				continue
			}
			if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), ";") {
				continue
			}
			if len(cur.Blocks) == 0 {
				cur.Blocks = append(cur.Blocks, IRBlock{Locs: map[Loc]bool{}})
			}
			if m := dbgRefRE.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseUint(m[1], 10, 64)
				refs = append(refs, pending{&cur.Blocks[len(cur.Blocks)-1], id})
			}
		default:
			if m := locationRE.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseUint(m[1], 10, 64)
				l, err := strconv.ParseUint(m[2], 10, 32)
				if err != nil {
					return nil, fmt.Errorf("compare: ir line %d: location line %q: %w", n, m[2], err)
				}
				scope, _ := strconv.ParseUint(m[3], 10, 64)
				locs[id] = location{l, scope}
			} else if m := blockFileRE.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseUint(m[1], 10, 64)
				d, err := strconv.ParseUint(m[2], 10, 32)
				if err != nil {
					return nil, fmt.Errorf("compare: ir line %d: discriminator %q: %w", n, m[2], err)
				}
				discs[id] = uint32(d)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("compare: reading ir: %w", err)
	}
	for _, p := range refs {
		if l := locs[p.ref]; l.line != 0 {
			p.block.Locs[Loc{uint32(l.line), discs[l.scope]}] = true
		}
	}
	return funcs, nil
}

var (
	bfiFunctionRE = regexp.MustCompile(`^block-frequency-info: (.+)$`)
	bfiBlockRE    = regexp.MustCompile(`^ - [^:]*: float = ([0-9.eE+-]+)`)
)

// ParseBlockFrequencies reads the output of opt's print<block-freq> pass: per function, each
// block's frequency relative to the entry, in the function's block order.
func ParseBlockFrequencies(r io.Reader) (map[string][]float64, error) {
	freqs := map[string][]float64{}
	var cur string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxIRLineBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := bfiFunctionRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			freqs[cur] = []float64{}
			continue
		}
		if m := bfiBlockRE.FindStringSubmatch(line); m != nil && cur != "" {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return nil, fmt.Errorf("compare: block frequencies line %d: %w", n, err)
			}
			freqs[cur] = append(freqs[cur], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("compare: reading block frequencies: %w", err)
	}
	return freqs, nil
}
