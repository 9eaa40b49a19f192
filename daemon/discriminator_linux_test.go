package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"testing"

	"github.com/profd/profd/profileio"
)

// profdataLine is a body line of llvm-profdata-14 show --sample: "  offset[.disc]: count".
var profdataLine = regexp.MustCompile(`^\s+(\d+)\.(\d+): (\d+)`)

// checkDiscriminators checks what the GDB JIT debug objects add (lli-14 registers one per
// object; hot.ll is compiled with -fdebug-info-for-profiling): the capture's line entries of
// the hot functions carry discriminators, the LLVM profiles profd wrote have lines with
// discriminators, and llvm-profdata-14 reads back exactly those lines and counts from the
// text and the ext-binary file.
func checkDiscriminators(t *testing.T, d dirs, pid int, c *profileio.Capture) {
	t.Helper()
	hot := map[string]bool{}
	for _, n := range hotFunctions {
		hot[n] = true
	}
	with := 0
	for _, o := range c.Objects {
		for _, l := range o.Object.Lines {
			if hot[o.Object.Name] && l.Discriminator != 0 {
				with++
			}
		}
	}
	if with == 0 {
		t.Fatal("no line entry of the hot functions has a discriminator: the GDB JIT debug objects were not merged")
	}
	p := readLLVMText(t, outputPath(d, "lli", pid, FormatLLVMText))
	var want []string
	for _, fp := range p.SortedFunctions() {
		for loc, n := range fp.Body {
			if loc.Discriminator != 0 {
				want = append(want, fmt.Sprintf("%s %d.%d: %d", fp.Name, loc.LineOffset, loc.Discriminator, n))
			}
		}
	}
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatal("profd's LLVM text profile has no line with a discriminator")
	}
	for _, format := range []Format{FormatLLVMText, FormatLLVMExtBinary} {
		path := outputPath(d, "lli", pid, format)
		out, err := exec.Command("llvm-profdata-14", "show", "--sample", "--all-functions", path).Output()
		if err != nil {
			t.Fatalf("llvm-profdata-14 show %s: %v", path, err)
		}
		var got []string
		fn := ""
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var name string
			if n, _ := fmt.Sscanf(sc.Text(), "Function: %s", &name); n == 1 {
				fn = name[:len(name)-1] // "name:"
			}
			if m := profdataLine.FindStringSubmatch(sc.Text()); m != nil && m[2] != "0" {
				got = append(got, fmt.Sprintf("%s %s.%s: %s", fn, m[1], m[2], m[3]))
			}
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("llvm-profdata-14 reads these lines with discriminators from %s:\n%v\nprofd wrote:\n%v", path, got, want)
		}
	}
	t.Logf("%d line entries of hot functions with discriminators; %d profile lines", with, len(want))
}
