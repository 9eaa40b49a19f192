%% hot spins in spin/2 for the seconds its argument gives: a workload for profd's tests of
%% Erlang's JIT (+JPperf).
-module(hot).
-export([main/1, spin/2]).

spin(0, Acc) -> Acc;
spin(N, Acc) -> spin(N - 1, (Acc * 31 + N) rem 1000003).

loop(Deadline) ->
    spin(100000, 1),
    case erlang:monotonic_time(millisecond) < Deadline of
        true -> loop(Deadline);
        false -> ok
    end.

main([Secs]) ->
    Deadline = erlang:monotonic_time(millisecond) + list_to_integer(atom_to_list(Secs)) * 1000,
    loop(Deadline),
    halt().
