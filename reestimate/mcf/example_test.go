package mcf_test

import (
	"fmt"

	"github.com/profd/profd/reestimate/mcf"
)

// A cycle of two arcs: the first pays 3 a unit, the way back costs 1, so the circulation
// runs as much round the cycle as the narrower arc allows.
func ExampleSolver() {
	net := &mcf.Network{Nodes: 2, Source: -1, Sink: -1, Return: -1, Arcs: []mcf.Arc{
		{From: 0, To: 1, Cap: 5, Cost: -3},
		{From: 1, To: 0, Cap: 4, Cost: 1},
	}}
	for _, s := range []mcf.Solver{mcf.SSPSolver(), mcf.SimplexSolver(), mcf.ReferenceSolver()} {
		flow, err := s.Solve(net)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(s.Name(), flow, net.Cost(flow), net.CheckCirculation(flow))
	}
	// Output:
	// ssp [4 4] -8 <nil>
	// network-simplex [4 4] -8 <nil>
	// edmonds-karp+klein [4 4] -8 <nil>
}
