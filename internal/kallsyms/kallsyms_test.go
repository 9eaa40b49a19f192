package kallsyms

import (
	"os"
	"strings"
	"testing"
)

func TestParseAndLookup(t *testing.T) {
	in := "ffffffff81000000 T _stext\n" +
		"ffffffff81000100 t do_one\n" +
		"ffffffff81000100 T do_one_alias\n" +
		"ffffffff81000200 D some_data\n" +
		"garbage line\n" +
		"ffffffffc0000000 t mod_fn\t[nf_tables]\n" +
		"0000000000000000 T hidden\n"
	tab, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		want string
		ok   bool
	}{
		{0xffffffff80ffffff, "", false},
		{0xffffffff81000000, "_stext", true},
		{0xffffffff810000ff, "_stext", true},
		{0xffffffff81000150, "do_one", true},
		{0xffffffff81000250, "do_one", true}, // data symbols are not functions
		{0xffffffffc0000010, "mod_fn [nf_tables]", true},
	} {
		got, ok := tab.Lookup(c.addr)
		if got != c.want || ok != c.ok {
			t.Errorf("Lookup(%#x) = %q, %v; want %q, %v", c.addr, got, ok, c.want, c.ok)
		}
	}
	if tab.Len() != 4 {
		t.Errorf("%d symbols, want 4 (text symbols with addresses)", tab.Len())
	}
}

// TestLoad reads this kernel's table, as root sees it, and names a well-known function.
func TestLoad(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("kallsyms hides addresses from non-root")
	}
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() < 1000 {
		t.Fatalf("%d symbols", tab.Len())
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("ffffffff81000000 T _stext\nffffffff81000100 t x [m]\n"))
	f.Add([]byte("zz T\n\n  \t"))
	f.Fuzz(func(t *testing.T, in []byte) {
		tab, err := Parse(strings.NewReader(string(in)))
		if err != nil {
			return
		}
		for i := 1; i < len(tab.syms); i++ {
			if tab.syms[i-1].addr > tab.syms[i].addr {
				t.Fatal("not sorted")
			}
		}
		tab.Lookup(0xffffffff81000000)
	})
}
