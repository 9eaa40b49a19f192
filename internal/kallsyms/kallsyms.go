// Package kallsyms names kernel addresses from /proc/kallsyms.
package kallsyms

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// Path is where the kernel lists its symbols.
const Path = "/proc/kallsyms"

// maxLineBytes bounds a line; longer ones are skipped.
const maxLineBytes = 4096

// Table is the kernel's text symbols by address.
type Table struct {
	syms []symbol // ascending addr
}

type symbol struct {
	addr uint64
	name string
}

// Load reads Path. Its error says why the table is empty: the file is unreadable, or the
// kernel hides its addresses (kptr_restrict) from this process.
func Load() (*Table, error) {
	f, err := os.Open(Path)
	if err != nil {
		return nil, fmt.Errorf("kallsyms: %w", err)
	}
	defer f.Close()
	t, err := Parse(f)
	if err != nil {
		return nil, err
	}
	if len(t.syms) == 0 {
		return nil, fmt.Errorf("kallsyms: %s lists no addresses (kernel.kptr_restrict hides them from this process)", Path)
	}
	return t, nil
}

// Parse reads the kallsyms format: "address type name [module]" per line. Only text symbols
// (types t and T) are kept; lines it cannot read are skipped.
func Parse(r io.Reader) (*Table, error) {
	t := &Table{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 3 || len(fields[1]) != 1 || (fields[1][0] != 't' && fields[1][0] != 'T') {
			continue
		}
		addr, err := strconv.ParseUint(string(fields[0]), 16, 64)
		if err != nil || addr == 0 {
			continue
		}
		name := string(fields[2])
		if len(fields) > 3 {
			name += " " + string(fields[3])
		}
		t.syms = append(t.syms, symbol{addr, name})
	}
	if err := sc.Err(); err != nil && err != bufio.ErrTooLong {
		return nil, fmt.Errorf("kallsyms: %w", err)
	}
	slices.SortStableFunc(t.syms, func(a, b symbol) int { return cmp.Compare(a.addr, b.addr) })
	return t, nil
}

// Lookup names the function addr is in: the text symbol at or below it. It reports false
// for an address below every symbol.
func (t *Table) Lookup(addr uint64) (string, bool) {
	if t == nil {
		return "", false
	}
	i, found := slices.BinarySearchFunc(t.syms, addr, func(s symbol, a uint64) int { return cmp.Compare(s.addr, a) })
	if !found {
		if i == 0 {
			return "", false
		}
		i--
	}
	// Several names at one address: the first listed.
	for i > 0 && t.syms[i-1].addr == t.syms[i].addr {
		i--
	}
	return t.syms[i].name, true
}

// Len is the number of symbols.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.syms)
}
