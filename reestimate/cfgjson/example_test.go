package cfgjson_test

import (
	"fmt"
	"strings"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfgjson"
)

// An explicit CFG: a block that branches around a second one into a third, which exits.
func ExampleRead() {
	in := `{"version": 1, "functions": [{"name": "f", "addr": "0x1000", "cfg": {
		"blocks": [{"insts": 2, "samples": 20}, {"insts": 1, "samples": 3}, {"insts": 1, "samples": 10, "exit": true}],
		"edges": [{"from": 0, "to": 1, "kind": "not-taken"}, {"from": 0, "to": 2, "kind": "taken"}, {"from": 1, "to": 2, "kind": "fallthrough"}]}}]}`
	funcs, err := cfgjson.Read(strings.NewReader(in))
	if err != nil {
		fmt.Println(err)
		return
	}
	given := funcs[0].Given
	r, err := reestimate.RepairSamples(given.CFG, given.Attribution(), reestimate.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, b := range r.Graph.Blocks {
		fmt.Printf("block %d [%#x,%#x) exit=%v\n", i, b.Start, b.End, b.Exit)
	}
	fmt.Println("weights", r.Weights)
	// Output:
	// block 0 [0x1000,0x1002) exit=false
	// block 1 [0x1002,0x1003) exit=false
	// block 2 [0x1003,0x1004) exit=true
	// weights [10 3 10]
}
