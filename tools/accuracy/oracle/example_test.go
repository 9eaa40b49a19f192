package oracle_test

import (
	"fmt"
	"strings"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/tools/accuracy/callgrind"
	"github.com/profd/profd/tools/accuracy/oracle"
)

func ExampleJoin() {
	// A loop of ten iterations, as callgrind counted it...
	prof, err := callgrind.Parse(strings.NewReader(`positions: instr line
events: Ir
ob=(1) ???
fn=(1) 0x0000000000001000
0x1000 0 1
+2 0 10
+2 0 10
+3 0 10
jcnd=9/10 -5 0
* 0
+2 0 1
`), callgrind.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// ...and the code object the jitdump of the same run named.
	code := []byte{0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3} // xor; inc; cmp; jne; ret
	obj := codeobj.Object{Name: "count10", Addr: 0x1000, Size: uint64(len(code)), Code: code}
	res, err := oracle.Join(prof, []codeobj.Object{obj}, oracle.JoinOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	f, _ := res.Function("count10")
	fmt.Println(f.Name, "ran", f.Instructions, "instructions")
	for _, j := range f.Jumps {
		fmt.Printf("jump %v -> %v taken %d of %d\n", j.From, j.To, j.Count, j.Executed)
	}
	for _, e := range f.Fallthroughs {
		fmt.Printf("fall-through %v -> %v %d\n", e.From, e.To, e.Count)
	}
	// Output:
	// count10 ran 32 instructions
	// jump 0x1007 -> 0x1002 taken 9 of 10
	// fall-through 0x1000 -> 0x1002 1
	// fall-through 0x1002 -> 0x1004 10
	// fall-through 0x1004 -> 0x1007 10
	// fall-through 0x1007 -> 0x1009 1
}
