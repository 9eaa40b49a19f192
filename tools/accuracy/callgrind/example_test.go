package callgrind_test

import (
	"fmt"
	"strings"

	"github.com/profd/profd/tools/accuracy/callgrind"
)

func ExampleParse() {
	const file = `positions: instr line
events: Ir
ob=(1) ???
fn=(1) 0x0000000004000000
0x4000000 0 1
+4 0 1000
jcnd=999/1000 * 0
* 0
+6 0 1
`
	p, err := callgrind.Parse(strings.NewReader(file), callgrind.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ir := p.EventIndex("Ir")
	for _, in := range p.Instrs {
		fmt.Printf("%#x ran %d times\n", in.Addr, in.Self[ir])
	}
	for _, j := range p.Jumps {
		fmt.Printf("%#x -> %#x taken %d of %d\n", j.From, j.To, j.Taken, j.Executed)
	}
	// Output:
	// 0x4000000 ran 1 times
	// 0x4000004 ran 1000 times
	// 0x400000a ran 1 times
	// 0x4000004 -> 0x4000004 taken 999 of 1000
}
