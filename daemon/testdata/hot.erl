%% hot spins in spin/2 for the seconds of CPU time its argument gives (the runtime system's,
%% erlang:statistics(runtime)): a workload for profd's tests of Erlang's JIT (+JPperf). On a
%% busy machine it takes longer, and is sampled as often as when idle.
-module(hot).
-export([main/1, spin/2]).

spin(0, Acc) -> Acc;
spin(N, Acc) -> spin(N - 1, (Acc * 31 + N) rem 1000003).

loop(UntilMs) ->
    spin(100000, 1),
    {RunMs, _} = erlang:statistics(runtime),
    case RunMs < UntilMs of
        true -> loop(UntilMs);
        false -> ok
    end.

main([Secs]) ->
    {StartMs, _} = erlang:statistics(runtime),
    loop(StartMs + list_to_integer(atom_to_list(Secs)) * 1000),
    halt().
