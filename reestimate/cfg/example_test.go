package cfg_test

import (
	"fmt"

	"github.com/profd/profd/reestimate/cfg"
)

// A loop counting down: its CFG and the block weights of its samples.
func ExampleBuild() {
	code := []byte{
		0xb8, 0x00, 0x00, 0x00, 0x00, // 0: mov eax, 0
		0x01, 0xf8, // 5: add eax, edi   <- loop
		0xff, 0xcf, // 7: dec edi
		0x75, 0xfa, // 9: jne 5
		0xc3, // b: ret
	}
	const addr = 0x401000
	g, err := cfg.Build(code, addr)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, b := range g.Blocks {
		fmt.Printf("block %d [%#x,%#x) %d insts exit=%v\n", i, b.Start, b.End, len(b.Insts), b.Exit)
	}
	for _, e := range g.Edges {
		fmt.Printf("edge %d->%d %v\n", e.From, e.To, e.Kind)
	}
	samples := map[uint64]uint64{addr + 5: 31, addr + 7: 29, addr + 10: 30} // addr+10 is inside the jne
	weights, err := cfg.BlockWeights(g, samples)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("weights", weights)
	// Output:
	// block 0 [0x401000,0x401005) 1 insts exit=false
	// block 1 [0x401005,0x40100b) 3 insts exit=false
	// block 2 [0x40100b,0x40100c) 1 insts exit=true
	// edge 0->1 fallthrough
	// edge 1->1 taken
	// edge 1->2 not-taken
	// weights [0 30 0]
}
