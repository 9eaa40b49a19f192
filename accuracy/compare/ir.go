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
// source lines of its instructions (the innermost DILocation's line: the line table of the
// machine code names the same one).
type IRFunction struct {
	Name   string
	Blocks []IRBlock
}

// IRBlock is a basic block of an IRFunction.
type IRBlock struct {
	Label string // "" for an unlabelled entry block
	Lines map[uint32]bool
}

// maxIRLineBytes caps one line of IR text.
const maxIRLineBytes = 1 << 20

var (
	defineRE   = regexp.MustCompile(`^define [^@]*@("[^"]*"|[-\w.$]+)\(`)
	labelRE    = regexp.MustCompile(`^("[^"]*"|[-\w.$]+):`)
	dbgRefRE   = regexp.MustCompile(`!dbg !(\d+)`)
	locationRE = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DILocation\(line: (\d+)`)
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
	locLine := map[uint64]uint32{}
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
				cur.Blocks = append(cur.Blocks, IRBlock{Label: strings.Trim(m[1], `"`), Lines: map[uint32]bool{}})
				continue
			}
			if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), ";") {
				continue
			}
			if len(cur.Blocks) == 0 {
				cur.Blocks = append(cur.Blocks, IRBlock{Lines: map[uint32]bool{}})
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
				locLine[id] = uint32(l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("compare: reading ir: %w", err)
	}
	for _, p := range refs {
		if l := locLine[p.ref]; l != 0 {
			p.block.Lines[l] = true
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
