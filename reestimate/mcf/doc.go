// Package mcf finds minimum-cost circulations: integer flows on a Network's arcs, within
// their capacities and conserved at every node, of least total cost.
//
// Three exact solvers sit behind the Solver interface: SSPSolver (the default: successive
// shortest paths with potentials, run on what a series–parallel reduction leaves of the
// network: spreduce.go), SimplexSolver (primal network simplex, after folding away arcs that cannot
// bind: presolve.go), and ReferenceSolver (the Edmonds–Karp plus Klein cycle-cancelling
// method of the paper reestimate descends from), which tests use to check the others.
//
//	net := &mcf.Network{Nodes: 2, Source: -1, Sink: -1, Return: -1, Arcs: []mcf.Arc{
//		{From: 0, To: 1, Cap: 5, Cost: -3},
//		{From: 1, To: 0, Cap: 4, Cost: 1},
//	}}
//	flow, err := mcf.SSPSolver().Solve(net) // flow[i] for net.Arcs[i]: 4, 4
//	if err != nil { ... } // wraps ErrBadNetwork
//	cost := net.Cost(flow) // -8
//
// Network.Validate states the limits that keep every sum inside int64; CheckCirculation and
// Cost check and price a flow. Solvers do not modify the Network and are safe for
// concurrent use.
package mcf
